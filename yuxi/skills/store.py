"""Adding a shared skill from its files: what the API's upload and ``yuxi skill add``
share. The bytes are checked here (the Agent Skills format, the dependency names), then
``yuxi.skill_add`` stores them as a new immutable version."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from yuxi.agents.tools.names import builtin_tool_names
from yuxi.queue.errors import InvalidInput
from yuxi.queue.skills import SkillAdded, SkillInfo, skill_add
from yuxi.skills.format import (
    SkillBundle,
    SkillFormatError,
    bundle,
    check_relative,
    is_skill_slug,
    read_zip,
)
from yuxi.skills.resolve import (
    PERSONAL_DIR,
    SkillError,
    SkillRecord,
    closure,
    merge,
    personal_skills,
    shared_records,
)


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


def user_personal_skills(workspace: Path) -> list[SkillRecord]:
    """The personal skills a user's workspace holds (for listings)."""
    return personal_skills(workspace)


def place_personal_skill(workspace: Path, found: SkillBundle, shared: Sequence[SkillInfo]) -> None:
    """Writes ``found`` as a personal skill of the workspace (``skills/<slug>/``, replacing
    that skill's directory), after checking that its skill dependencies resolve for the
    user (``shared``: the shared skills they may use). InvalidInput otherwise."""
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
    available = merge(shared_records(shared), [*personal_skills(workspace), record])
    try:
        closure([meta.name], available)
    except SkillError as error:
        raise InvalidInput(str(error)) from None
    base = workspace / PERSONAL_DIR
    if base.is_symlink():
        raise InvalidInput("the workspace's skills directory is a symbolic link")
    base.mkdir(parents=True, exist_ok=True)
    target = base / meta.name
    staging = base / f".{meta.name}.new"
    shutil.rmtree(staging, ignore_errors=True)
    for name, data in found.files.items():
        path = staging / check_relative(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    remove_personal_skill(workspace, meta.name)
    staging.rename(target)


def remove_personal_skill(workspace: Path, slug: str) -> bool:
    """Removes the workspace's personal skill ``slug``; whether there was one."""
    if not is_skill_slug(slug):
        return False
    target = workspace / PERSONAL_DIR / slug
    if target.is_symlink():
        target.unlink()
        return True
    if not target.is_dir():
        return False
    shutil.rmtree(target)
    return True
