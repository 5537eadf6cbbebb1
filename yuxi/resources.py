"""What a resource kind is, and the catalog that says who may use which.

A run's agent selects resources of four kinds; each is declared once here as a
``ResourceKind``:

| kind (API, SQL)   | Context field | what a run resolves                             |
|-------------------|---------------|-------------------------------------------------|
| `tools`           | `tools`       | built-in tool names                             |
| `knowledge_bases` | `knowledges`  | `[{id, name, slug}]`, for search_knowledge      |
| `mcp_servers`     | `mcps`        | `[{id, slug, name, transport, version}]`, tools |
| `skills`          | `skills`      | versions, files, prompt (yuxi/skills/)          |

The Context fields keep seed 004's names (``knowledges``, ``mcps``); everywhere else a
kind is spelt as in the first column.

The selection rule: unset = everything the user can access; an explicit list = that
list ∩ accessible; an explicit empty list = none. ``subagents``: unset or empty = every
subagent the user can see. Skills are expanded to the closure of their dependencies
(``skill_closure`` here; a run's skills, with personal ones and dependency errors, are
resolved by yuxi/skills/). What a run resolved travels in its Context's ``resolved``
(``yuxi.agents.context.Resolved``), never in loose attributes.

Adding a kind: a package that owns it (its SQL file, routes, tool), its
``ResourceKind`` in ``RESOURCE_KINDS``, its list in ``yuxi.run_catalog``, its Context
field and its field of ``Resolved``; CONTRIBUTING.md has the recipe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

import msgspec
from psycopg_pool import AsyncConnectionPool

from yuxi.agents.tools.names import builtin_tool_names
from yuxi.queue.runs import run_catalog
from yuxi.queue.skills import SkillInfo, skill_files_many


@dataclass(frozen=True)
class ResourceKind:
    """One kind of resource an agent selects."""

    # the kind's one name: the API's, the catalog's (``yuxi.run_catalog``), the manifest's
    name: str
    # the agent's Context field holding the selection (seed 004 names them)
    context_field: str
    # the field of ``Resolved`` holding what a run resolved of it; None: the narrowed
    # ids are all (tools), or its package resolves it (skills)
    resolved_field: str | None = None
    # the keys of a resolved entry that the manifest records (never content or secrets)
    manifest_keys: tuple[str, ...] = ()
    # a row of the kind's list in ``yuxi.run_catalog`` (under ``name``) as ``(id,
    # entry)``; None for a kind the catalog does not list (tools: the built-ins) or
    # lists in its own shape (skills)
    entry: Callable[[Mapping[str, Any]], tuple[str, dict[str, str]]] | None = None


def _knowledge_base(row: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    kb = str(row["id"])
    return kb, {"id": kb, "name": row["name"], "slug": row["slug"]}


def _mcp_server(row: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    return row["slug"], {
        "id": str(row["id"]),
        "slug": row["slug"],
        "name": row["name"],
        "transport": row["transport"],
        # the row's updated_at, one text whatever the session's JSON looks like
        "version": datetime.fromisoformat(row["version"]).isoformat(),
    }


TOOLS = ResourceKind("tools", "tools")
KNOWLEDGE_BASES = ResourceKind(
    "knowledge_bases",
    "knowledges",
    "knowledge_bases",
    manifest_keys=("id", "name"),
    entry=_knowledge_base,
)
MCP_SERVERS = ResourceKind(
    "mcp_servers",
    "mcps",
    "mcp_servers",
    manifest_keys=("slug", "id", "transport", "version"),
    entry=_mcp_server,
)
SKILLS = ResourceKind("skills", "skills")

RESOURCE_KINDS: tuple[ResourceKind, ...] = (TOOLS, KNOWLEDGE_BASES, MCP_SERVERS, SKILLS)


def kind_named(name: str) -> ResourceKind:
    """The kind called ``name`` (its API name, or its Context field's)."""
    for kind in RESOURCE_KINDS:
        if name in (kind.name, kind.context_field):
            return kind
    raise KeyError(name)


class ResourceCatalog(Protocol):
    """What exists and who may use it: the whole interface preparation, the API's
    configuration form and the skills resolver use. ``DatabaseCatalog`` is the
    production one; ``ListedCatalog`` answers from names alone (for embedding yuxi
    with resources of its own, and for tests)."""

    def for_run(self, snapshot: Mapping[str, Any] | None) -> ResourceCatalog:
        """This catalog for one run whose claim read ``snapshot`` (None: ask as usual)."""
        ...

    async def for_user(self, uid: UUID) -> ResourceCatalog:
        """This catalog with the user's resources read once, for several questions."""
        ...

    async def accessible(self, kind: ResourceKind, uid: UUID) -> list[str]:
        """Ids of ``kind`` the user may use, in a stable order."""
        ...

    async def entries(self, kind: ResourceKind, uid: UUID) -> dict[str, dict[str, str]]:
        """What the user may use of ``kind`` (one with ``entry``), by id: knowledge bases
        the user may read, ``{id, name, slug}``; enabled MCP servers the user may use,
        ``{id, slug, name, transport, version}`` (never headers or env)."""
        ...

    async def skill_infos(self, uid: UUID) -> list[SkillInfo] | None:
        """The latest version of every shared skill the user may use; None when this
        catalog knows skills by name only (``accessible`` and ``skill_dependencies``)."""
        ...

    async def skill_dependencies(self, uid: UUID) -> Mapping[str, Sequence[str]]:
        """For each accessible skill, the skills it depends on."""
        ...

    async def skill_files(
        self, versions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], dict[str, bytes]]:
        """The files of shared skill versions (empty for a catalog without files)."""
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


async def resolve(
    kind: ResourceKind, catalog: ResourceCatalog, uid: UUID, ids: Sequence[str]
) -> list[dict[str, str]]:
    """The entries of the (already narrowed) ``ids`` of ``kind``, for ``Resolved``."""
    if not ids:
        return []
    known = await catalog.entries(kind, uid)
    return [known[item] for item in ids if item in known]


def manifest_entries(
    kind: ResourceKind, resolved: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """What the manifest records of a kind's resolved entries."""
    return [{key: entry[key] for key in kind.manifest_keys} for entry in resolved]


class ListedCatalog:
    """A catalog that knows resources by name only: ``accessible`` and
    ``skill_dependencies`` are the whole of it (override them). Knowledge bases and MCP
    servers are named by their ids; skills have no versions or files."""

    def for_run(self, snapshot: Mapping[str, Any] | None) -> ResourceCatalog:
        return self

    async def for_user(self, uid: UUID) -> ResourceCatalog:
        return self

    async def accessible(self, kind: ResourceKind, uid: UUID) -> list[str]:
        return []

    async def skill_dependencies(self, uid: UUID) -> Mapping[str, Sequence[str]]:
        return {}

    async def entries(self, kind: ResourceKind, uid: UUID) -> dict[str, dict[str, str]]:
        """Each id as its own name (no versions, no transport)."""
        keys = {"id", "slug", "name", *kind.manifest_keys}
        return {
            item: {key: "" if key in ("transport", "version") else item for key in keys}
            for item in await self.accessible(kind, uid)
        }

    async def skill_infos(self, uid: UUID) -> list[SkillInfo] | None:
        return None

    async def skill_files(
        self, versions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], dict[str, bytes]]:
        return {}


class DatabaseCatalog:
    """Resources as the database knows them (``yuxi.run_catalog``: one read for every
    kind). Tools are the built-ins (every user may use them); knowledge bases are those
    the user may read, by id; skills the shared skills the user may use, by slug (a
    user's personal skills are read from their workspace at preparation); MCP servers
    the enabled ones the user may use, by slug. (The subagents a user can see come with
    the run's claim.)"""

    def __init__(
        self, pool: AsyncConnectionPool[Any], snapshot: Mapping[str, Any] | None = None
    ) -> None:
        self._pool = pool
        self._snapshot = snapshot

    def for_run(self, snapshot: Mapping[str, Any] | None) -> DatabaseCatalog:
        return self if snapshot is None else DatabaseCatalog(self._pool, snapshot)

    async def for_user(self, uid: UUID) -> DatabaseCatalog:
        return DatabaseCatalog(self._pool, await self._catalog(uid))

    async def _catalog(self, uid: UUID) -> Mapping[str, Any]:
        if self._snapshot is not None:
            return self._snapshot
        async with self._pool.connection() as conn:
            return await run_catalog(conn, uid)

    async def accessible(self, kind: ResourceKind, uid: UUID) -> list[str]:
        if kind is TOOLS:
            return builtin_tool_names()
        if kind is SKILLS:
            return [skill.slug for skill in await self.skill_infos(uid)]
        return list(await self.entries(kind, uid))

    async def skill_infos(self, uid: UUID) -> list[SkillInfo]:
        skills = (await self._catalog(uid)).get("skills") or []
        return msgspec.convert(skills, list[SkillInfo], strict=False)

    async def skill_files(
        self, versions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], dict[str, bytes]]:
        """In one query, read as an operator: the run's access was checked when its
        skills were listed."""
        found: dict[tuple[str, int], dict[str, bytes]] = {key: {} for key in versions}
        async with self._pool.connection() as conn:
            for row in await skill_files_many(conn, versions):
                found.setdefault((row.slug, row.version), {})[row.path] = row.content
        return found

    async def entries(self, kind: ResourceKind, uid: UUID) -> dict[str, dict[str, str]]:
        if kind.entry is None:
            raise ValueError(f"the catalog lists no entries of {kind.name}")
        rows = (await self._catalog(uid)).get(kind.name) or []
        return dict(kind.entry(row) for row in rows)

    async def skill_dependencies(self, uid: UUID) -> Mapping[str, Sequence[str]]:
        return {skill.slug: skill.depends_skills for skill in await self.skill_infos(uid)}
