"""Shared skills (``yuxi.skill_*``): adding versions, listing what a user may use,
reading a version's files, deleting. Parsing the Agent Skills format is the runtime's
(yuxi/skills/format.py); these only call SQL."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.calls import call_many, call_one, encode_json
from yuxi.queue.errors import typed_errors


class SkillInfo(msgspec.Struct, frozen=True):
    """A row of ``yuxi.skills_usable``: a skill's latest version."""

    slug: str
    version: int
    sha256: str
    description: str
    depends_skills: list[str]
    depends_tools: list[str]
    depends_mcps: list[str]
    files: int
    bytes: int
    share_scope: str
    shared_with: list[UUID]
    created_at: datetime
    updated_at: datetime


class SkillVersion(msgspec.Struct, frozen=True):
    """A row of ``yuxi.skill_versions_of``."""

    slug: str
    version: int
    sha256: str
    description: str
    files: int
    bytes: int
    created_at: datetime


class SkillAdded(msgspec.Struct, frozen=True):
    """A row of ``yuxi.skill_add``: ``created`` is false when the files equalled the
    latest version's."""

    slug: str
    version: int
    sha256: str
    created: bool


class SkillFile(msgspec.Struct, frozen=True):
    """A row of ``yuxi.skill_files_of``."""

    version: int
    sha256: str
    path: str
    content: bytes


async def skill_add(
    conn: AsyncConnection[Any],
    uid: UUID | None,
    *,
    slug: str,
    description: str,
    front_matter: Mapping[str, Any],
    files: Mapping[str, bytes],
    skills: Sequence[str] = (),
    tools: Sequence[str] = (),
    mcps: Sequence[str] = (),
    share_scope: str | None = None,
    shared_with: Sequence[UUID] | None = None,
) -> SkillAdded:
    paths = list(files)
    return await call_one(
        conn,
        SkillAdded,
        "yuxi.skill_add(p_uid => %(uid)s, p_slug => %(slug)s, p_description => %(description)s,"
        " p_front_matter => %(front)s::jsonb, p_paths => %(paths)s::text[],"
        " p_contents => %(contents)s::bytea[], p_skills => %(skills)s::text[],"
        " p_tools => %(tools)s::text[], p_mcps => %(mcps)s::text[],"
        " p_share_scope => %(scope)s, p_shared_with => %(shared)s::uuid[])",
        {
            "uid": uid,
            "slug": slug,
            "description": description,
            "front": encode_json(dict(front_matter)),
            "paths": paths,
            "contents": [files[p] for p in paths],
            "skills": list(skills),
            "tools": list(tools),
            "mcps": list(mcps),
            "scope": share_scope,
            "shared": None if shared_with is None else list(shared_with),
        },
    )


async def skills_usable(conn: AsyncConnection[Any], uid: UUID | None) -> list[SkillInfo]:
    return await call_many(conn, SkillInfo, "yuxi.skills_usable(%(uid)s)", {"uid": uid})


async def skill_get(conn: AsyncConnection[Any], uid: UUID | None, slug: str) -> SkillInfo:
    from yuxi.queue.errors import NotFound

    for info in await call_many(
        conn,
        SkillInfo,
        "yuxi.skills_usable(%(uid)s) AS s WHERE s.slug = %(slug)s",
        {"uid": uid, "slug": slug},
    ):
        return info
    raise NotFound(f"skill {slug} not found")


async def skill_versions(
    conn: AsyncConnection[Any], uid: UUID | None, slug: str
) -> list[SkillVersion]:
    return await call_many(
        conn, SkillVersion, "yuxi.skill_versions_of(%(uid)s, %(slug)s)", {"uid": uid, "slug": slug}
    )


async def skill_files(
    conn: AsyncConnection[Any], uid: UUID | None, slug: str, version: int | None = None
) -> list[SkillFile]:
    return await call_many(
        conn,
        SkillFile,
        "yuxi.skill_files_of(%(uid)s, %(slug)s, %(version)s)",
        {"uid": uid, "slug": slug, "version": version},
    )


class SkillVersionFile(msgspec.Struct, frozen=True):
    """A row of ``yuxi.skill_files_many``."""

    slug: str
    version: int
    path: str
    content: bytes


async def skill_files_many(
    conn: AsyncConnection[Any], versions: Sequence[tuple[str, int]]
) -> list[SkillVersionFile]:
    """The files of several versions in one query (read as an operator)."""
    return await call_many(
        conn,
        SkillVersionFile,
        "yuxi.skill_files_many(%(slugs)s::text[], %(versions)s::integer[])",
        {"slugs": [s for s, _v in versions], "versions": [v for _s, v in versions]},
    )


async def skill_delete(conn: AsyncConnection[Any], uid: UUID | None, slug: str) -> None:
    with typed_errors():
        await conn.execute("SELECT yuxi.skill_delete(%s, %s)", (uid, slug))
