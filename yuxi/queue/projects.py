"""Projects (``yuxi.project_*``): a user's working directories."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.calls import call_many, call_one


class Project(msgspec.Struct, frozen=True):
    """A live project; ``workdir_path`` is the absolute path on the server."""

    id: UUID
    name: str
    workdir_path: str
    created_at: datetime


async def project_create(
    conn: AsyncConnection[Any], uid: UUID, name: str, workdir_path: str
) -> Project:
    return await call_one(
        conn,
        Project,
        "yuxi.project_create(p_uid => %(uid)s, p_name => %(name)s,"
        " p_workdir_path => %(workdir_path)s)",
        {"uid": uid, "name": name, "workdir_path": workdir_path},
    )


async def project_list(conn: AsyncConnection[Any], uid: UUID) -> list[Project]:
    """The user's live projects, oldest first."""
    return await call_many(
        conn,
        Project,
        "yuxi.project_list(p_uid => %(uid)s)",
        {"uid": uid},
    )
