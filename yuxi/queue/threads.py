"""Conversations (threads): the unit a queue belongs to."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.calls import call_one


class Thread(msgspec.Struct, frozen=True):
    thread_id: UUID
    uid: UUID
    agent_slug: str
    project_id: UUID | None
    title: str
    status: str
    created_at: datetime
    updated_at: datetime


async def create_thread(
    conn: AsyncConnection[Any],
    *,
    uid: UUID,
    agent_slug: str,
    project_id: UUID | None = None,
    title: str = "",
) -> Thread:
    """Creates a conversation bound to an agent the user can see (NotFound otherwise)."""
    return await call_one(
        conn,
        Thread,
        "yuxi.thread_create(%(uid)s, %(a)s, %(p)s, %(t)s)",
        {"uid": uid, "a": agent_slug, "p": project_id, "t": title},
    )
