"""Adding a skill from its files: what the API's upload and ``yuxi skill add`` share.
The bytes are checked here (the Agent Skills format, the dependency names), then a
shared skill is stored by ``yuxi.skill_add`` as a new immutable version, and a personal
one goes into the user's workspace in the file store, ``skills/<slug>/``, in one
transaction. The API lists personal skills from the store; a worker reads them from its
local copy of the workspace (yuxi/skills/resolve.py)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from yuxi.agents.tools.names import builtin_tool_names
from yuxi.files.store import FileStore
from yuxi.files.workdir import media_type
from yuxi.queue.errors import InvalidInput
from yuxi.queue.files import FileInfo, file_delete, file_write, workspace_file_tree
from yuxi.queue.skills import SkillAdded, SkillInfo, skill_add
from yuxi.skills.format import (
    MAX_BYTES,
    MAX_FILES,
    SKILL_FILE,
    SkillBundle,
    SkillFormatError,
    bundle,
    check_relative,
    digest_header,
    is_skill_slug,
    parse_skill_md,
    read_zip,
)
from yuxi.skills.resolve import (
    PERSONAL_DIR,
    SkillError,
    SkillRecord,
    closure,
    merge,
    shared_records,
)

log = logging.getLogger(__name__)


def bundle_of_zip(data: bytes) -> SkillBundle:
    """A skill from a ZIP archive's bytes; InvalidInput when it is not a valid skill."""
    try:
        return bundle(read_zip(data))
    except SkillFormatError as error:
        raise InvalidInput(str(error)) from None


def check_tools(found: SkillBundle) -> None:
    """``dependencies.tools`` must name built-in tools (``allowed-tools`` may name tools of
    other products: only the built-in ones among them are used)."""
    deps = found.meta.front_matter.get("dependencies") or {}
    declared = deps.get("tools") or [] if isinstance(deps, dict) else []
    unknown = [t for t in declared if t not in builtin_tool_names()]
    if unknown:
        raise InvalidInput(
            f"skill {found.meta.name} depends on unknown tools: {', '.join(map(str, unknown))}"
            f" (built-in tools: {', '.join(builtin_tool_names())})"
        )


async def add_shared_skill(
    conn: AsyncConnection[Any],
    uid: UUID | None,
    found: SkillBundle,
    *,
    share_scope: str | None = None,
    shared_with: Sequence[UUID] | None = None,
) -> SkillAdded:
    """Stores ``found`` as the next version of its shared skill (none when its files
    equal the latest version's). Admins and operators only (``forbidden`` otherwise)."""
    check_tools(found)
    known = set(builtin_tool_names())
    return await skill_add(
        conn,
        uid,
        slug=found.meta.name,
        description=found.meta.description,
        front_matter=found.meta.front_matter,
        files=found.files,
        skills=found.meta.skills,
        tools=[t for t in found.meta.tools if t in known],
        mcps=found.meta.mcps,
        share_scope=share_scope,
        shared_with=shared_with,
    )


async def user_personal_skills(
    files: FileStore, uid: UUID, *, only: str | None = None
) -> list[SkillRecord]:
    """The personal skills of the user's workspace in the file store
    (``skills/<slug>/SKILL.md`` and the files beside it), by slug, their digests
    streamed from the store (``only``: that skill alone). A directory whose name is not
    a slug, that holds too much, or whose SKILL.md is missing, malformed or names
    another skill is skipped (and logged), as the worker's reading of its copy skips
    it."""
    tree = await files.workspace_tree(uid)
    grouped: dict[str, dict[str, FileInfo]] = {}
    prefix = PERSONAL_DIR if only is None else personal_skill_path(only)
    for info in await files.list(tree, prefix):
        _skills, slug, *rest = info.path.split("/", 2)
        if rest and is_skill_slug(slug):
            grouped.setdefault(slug, {})[rest[0]] = info
    found: list[SkillRecord] = []
    for slug in sorted(grouped):
        record = await _personal_record(files, slug, grouped[slug])
        if record is not None:
            found.append(record)
    return found


async def _personal_record(
    files: FileStore, slug: str, members: Mapping[str, FileInfo]
) -> SkillRecord | None:
    skill_md = members.get(SKILL_FILE)
    try:
        if skill_md is None:
            return None
        if len(members) > MAX_FILES or sum(i.bytes for i in members.values()) > MAX_BYTES:
            raise SkillFormatError(f"a skill has at most {MAX_FILES} files and {MAX_BYTES} bytes")
        raw = b"".join([piece async for piece in files.stream(skill_md)])
        meta = parse_skill_md(raw.decode("utf-8"))
        if meta.name != slug:
            raise SkillFormatError(f"SKILL.md names {meta.name}, not {slug}")
        digest = hashlib.sha256()
        for name in sorted(members, key=lambda n: n.encode()):
            info = members[name]
            digest.update(digest_header(name, info.bytes))
            async for piece in files.stream(info):
                digest.update(piece)
    except (SkillFormatError, UnicodeDecodeError, FileNotFoundError) as error:
        log.info("personal skill %s skipped: %s", slug, error)
        return None
    return SkillRecord(
        slug=meta.name,
        source="personal",
        description=meta.description,
        sha256=digest.hexdigest(),
        skills=meta.skills,
        tools=meta.tools,
        mcps=meta.mcps,
    )


async def place_personal_skill(
    conn: AsyncConnection[Any],
    files: FileStore,
    uid: UUID,
    found: SkillBundle,
    shared: Sequence[SkillInfo],
    *,
    writer_uid: UUID | None = None,
) -> None:
    """Writes ``found`` as a personal skill of the user's workspace in the file store
    (``skills/<slug>/``, replacing everything that was there) in one transaction on
    ``conn``, after checking that its skill dependencies resolve for the user
    (``shared``: the shared skills they may use). InvalidInput otherwise; past the
    store's limits, PayloadTooLarge, and nothing is written."""
    check_tools(found)
    meta = found.meta
    record = SkillRecord(
        meta.name,
        "personal",
        meta.description,
        sha256=found.sha256,
        skills=meta.skills,
        tools=meta.tools,
        mcps=meta.mcps,
    )
    mine = await user_personal_skills(files, uid)
    available = merge(shared_records(shared), [*mine, record])
    try:
        closure([meta.name], available)
    except SkillError as error:
        raise InvalidInput(str(error)) from None
    base = personal_skill_path(meta.name)
    async with conn.transaction():
        tree = await workspace_file_tree(conn, uid)
        await file_delete(conn, tree, base, prefix=True)
        for name in sorted(found.files, key=lambda n: n.encode()):
            await file_write(
                conn,
                tree,
                f"{base}/{check_relative(name)}",
                found.files[name],
                media_type=media_type(name),
                writer_uid=writer_uid,
            )


async def remove_personal_skill(files: FileStore, uid: UUID, slug: str) -> bool:
    """Removes the user's personal skill ``slug`` (every file under ``skills/<slug>/``
    of their workspace, in one statement); whether there was one."""
    if not is_skill_slug(slug):
        return False
    tree = await files.workspace_tree(uid)
    return await files.delete(tree, personal_skill_path(slug), prefix=True) > 0


def personal_skill_path(slug: str) -> str:
    """Where a personal skill's files are in the user's workspace tree."""
    return f"{PERSONAL_DIR}/{slug}"
