"""Which resources a run may use: the agent's selection narrowed to the user's access.

Rules (tools, knowledges, mcps, skills): unset = everything the user can access; an
explicit list = that list ∩ accessible; an explicit empty list = none. ``subagents``:
unset or empty = every subagent the user can see. Skills are expanded to the closure of
their dependencies (``skill_closure`` here; a run's skills, with personal ones and
dependency errors, are resolved by yuxi/skills/).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

import msgspec
from psycopg_pool import AsyncConnectionPool

from yuxi.agents.tools.names import builtin_tool_names
from yuxi.queue.runs import run_catalog
from yuxi.queue.skills import SkillInfo, skill_files_many

RESOURCE_KINDS = ("tools", "knowledges", "mcps", "skills")


class ResourceCatalog(Protocol):
    """What exists and who may use it. The database-backed catalog is the production one."""

    async def accessible(self, kind: str, uid: UUID) -> list[str]:
        """Resource ids of ``kind`` the user may use, in a stable order."""
        ...

    async def skill_dependencies(self, uid: UUID) -> Mapping[str, Sequence[str]]:
        """For each accessible skill, the skills it depends on."""
        ...


def narrow(selected: Sequence[str] | None, accessible: Sequence[str]) -> list[str]:
    """unset → all accessible; a list → the list ∩ accessible (list order, no repeats)."""
    if selected is None:
        return list(accessible)
    allowed = set(accessible)
    return [item for item in dict.fromkeys(selected) if item in allowed]


def narrow_subagents(selected: Sequence[str] | None, visible: Sequence[str]) -> list[str]:
    """Unset or empty → every visible subagent; a non-empty list narrows."""
    return narrow(selected or None, visible)


def skill_closure(
    selected: Sequence[str], dependencies: Mapping[str, Sequence[str]], accessible: Sequence[str]
) -> list[str]:
    """The selected skills plus everything they depend on, transitively, limited to the
    accessible ones; selection order first, then dependencies in discovery order."""
    allowed = set(accessible)
    closure: dict[str, None] = {}
    pending = [skill for skill in selected if skill in allowed]
    while pending:
        skill = pending.pop(0)
        if skill in closure:
            continue
        closure[skill] = None
        pending.extend(dep for dep in dependencies.get(skill, ()) if dep in allowed)
    return list(closure)


async def visible_mcp_servers(
    catalog: ResourceCatalog, uid: UUID, slugs: Sequence[str]
) -> list[dict[str, str]]:
    """``[{id, slug, name, transport, version}]`` of the (already narrowed) MCP servers
    ``slugs``: what ``_visible_mcp_servers`` holds (never headers or env). A catalog
    without ``mcp_servers`` names them by slug."""
    if not slugs:
        return []
    describe = getattr(catalog, "mcp_servers", None)
    if describe is None:
        return [{"id": s, "slug": s, "name": s, "transport": "", "version": ""} for s in slugs]
    known: dict[str, dict[str, str]] = await describe(uid)
    return [known[slug] for slug in slugs if slug in known]


async def visible_knowledge_bases(
    catalog: ResourceCatalog, uid: UUID, ids: Sequence[str]
) -> list[dict[str, str]]:
    """``[{id, name, slug}]`` of the (already narrowed) knowledge bases ``ids``: what
    ``_visible_knowledge_bases`` holds. A catalog without ``knowledge_bases`` names them
    by id."""
    if not ids:
        return []
    describe = getattr(catalog, "knowledge_bases", None)
    if describe is None:
        return [{"id": kb, "name": kb, "slug": kb} for kb in ids]
    known: dict[str, dict[str, str]] = await describe(uid)
    return [known[kb] for kb in ids if kb in known]


class DatabaseCatalog:
    """Resources as the database knows them (``yuxi.run_catalog``: one read for every
    kind). Tools are the built-ins (every user may use them); knowledge bases are those
    the user may read, by id; skills the shared skills the user may use, by slug (a
    user's personal skills are read from their workspace at preparation); MCP servers
    the enabled ones the user may use, by slug. (The subagents a user can see come with
    the run's execution input.)

    ``for_run(snapshot)``: the same catalog answering from what a run's claim read with
    it, instead of reading again."""

    def __init__(
        self, pool: AsyncConnectionPool[Any], snapshot: Mapping[str, Any] | None = None
    ) -> None:
        self._pool = pool
        self._snapshot = snapshot

    def for_run(self, snapshot: Mapping[str, Any] | None) -> DatabaseCatalog:
        """This catalog for one run whose claim read ``snapshot`` (None: query)."""
        return self if snapshot is None else DatabaseCatalog(self._pool, snapshot)

    async def for_user(self, uid: UUID) -> DatabaseCatalog:
        """This catalog with the user's resources read once, for several questions."""
        return DatabaseCatalog(self._pool, await self._catalog(uid))

    async def _catalog(self, uid: UUID) -> Mapping[str, Any]:
        if self._snapshot is not None:
            return self._snapshot
        async with self._pool.connection() as conn:
            return await run_catalog(conn, uid)

    async def accessible(self, kind: str, uid: UUID) -> list[str]:
        if kind == "tools":
            return builtin_tool_names()
        if kind == "knowledges":
            return list(await self.knowledge_bases(uid))
        if kind == "skills":
            return [skill.slug for skill in await self.skill_infos(uid)]
        if kind == "mcps":
            return list(await self.mcp_servers(uid))
        return []

    async def skill_infos(self, uid: UUID) -> list[SkillInfo]:
        """The latest version of every shared skill the user may use, by slug."""
        skills = (await self._catalog(uid)).get("skills") or []
        return msgspec.convert(skills, list[SkillInfo], strict=False)

    async def skill_files(
        self, versions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], dict[str, bytes]]:
        """The files of shared skill versions, in one query (read as an operator: the
        run's access was checked when its skills were listed)."""
        found: dict[tuple[str, int], dict[str, bytes]] = {key: {} for key in versions}
        async with self._pool.connection() as conn:
            for row in await skill_files_many(conn, versions):
                found.setdefault((row.slug, row.version), {})[row.path] = row.content
        return found

    async def mcp_servers(self, uid: UUID) -> dict[str, dict[str, str]]:
        """The enabled MCP servers the user may use, by slug: ``{id, slug, name,
        transport, version}``."""
        return {
            s["slug"]: {
                "id": str(s["id"]),
                "slug": s["slug"],
                "name": s["name"],
                "transport": s["transport"],
                # the row's updated_at, one text whatever the session's JSON looks like
                "version": datetime.fromisoformat(s["version"]).isoformat(),
            }
            for s in (await self._catalog(uid)).get("mcp_servers") or []
        }

    async def knowledge_bases(self, uid: UUID) -> dict[str, dict[str, str]]:
        """The knowledge bases the user may read, by id: ``{id, name, slug}``."""
        return {
            str(kb["id"]): {"id": str(kb["id"]), "name": kb["name"], "slug": kb["slug"]}
            for kb in (await self._catalog(uid)).get("knowledge_bases") or []
        }

    async def skill_dependencies(self, uid: UUID) -> Mapping[str, Sequence[str]]:
        return {skill.slug: skill.depends_skills for skill in await self.skill_infos(uid)}
