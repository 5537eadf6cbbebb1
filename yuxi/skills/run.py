"""The preparation hook of skills: from the agent's selection to the Context fields a
run's graph and file tools read.

It sets ``context.skills`` (the resolved closure), ``resolved.skill_roots`` (slug → the
directory of its files, for the file tools' read-only ``skills/`` root), ``resolved.skills_prompt``
(the index and the preloaded instructions) and ``resolved.skill_mounts`` (the built-in tools and
MCP servers each skill brings). What a skill brings and the agent's own selection does
not hold is added to ``context.tools`` / ``context.mcps`` (within what the user may use)
and shown to the model only once the skill is activated (yuxi/agents/tools/skills.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from uuid import UUID

from yuxi.agents.context import BaseContext
from yuxi.resources import MCP_SERVERS, SKILLS, TOOLS, ResourceCatalog
from yuxi.skills.resolve import (
    RunSkills,
    SkillRecord,
    catalog_records,
    prepare_skills,
    shared_records,
)


async def shared_skills(catalog: ResourceCatalog, uid: UUID) -> list[SkillRecord]:
    """The shared skills the user may use: versions and digests from a catalog that has
    them (the database's), names and dependencies only from another."""
    infos = await catalog.skill_infos(uid)
    if infos is not None:
        return shared_records(infos)
    return catalog_records(
        await catalog.accessible(SKILLS, uid), await catalog.skill_dependencies(uid)
    )


def skills_wanted(selected: Sequence[str] | None) -> bool:
    """False for ``skills: []``: none at all, not even the user's personal ones (and no
    preloads, which come from the selection too)."""
    return selected is None or bool(selected)


async def prepare_run_skills(
    context: BaseContext,
    selected: Sequence[str] | None,
    *,
    catalog: ResourceCatalog,
    uid: UUID,
    home: Path,
    shared: list[SkillRecord] | None,
    scanned: tuple[list[SkillRecord], set[str]] | None,
) -> RunSkills:
    """Resolves the run's skills into ``context`` (see the module) and returns them for
    the manifest. SkillError when an explicitly selected skill cannot be resolved.
    ``shared`` and ``scanned``: the caller's ``shared_skills`` and ``scan_skills``, None
    when ``skills_wanted`` is false."""

    preload = list(getattr(context, "preload_skills", None) or [])
    if shared is None or scanned is None:
        context.skills = []
        return RunSkills()

    async def fetch(
        versions: Sequence[tuple[str, int]],
    ) -> Mapping[tuple[str, int], Mapping[str, bytes]]:
        return await catalog.skill_files(versions)

    resolved = await prepare_skills(
        selected,
        preload,
        shared=shared,
        scanned=scanned,
        home=home,
        fetch=fetch,
    )
    context.skills = [skill.slug for skill in resolved.skills]
    context.resolved.skill_roots = dict(resolved.roots)
    context.resolved.skills_prompt = resolved.prompt
    context.resolved.preloaded_skills = list(resolved.preloaded)
    await add_skill_dependencies(context, resolved.skills, catalog=catalog, uid=uid)
    return resolved


async def add_skill_dependencies(
    context: BaseContext, skills: Sequence[SkillRecord], *, catalog: ResourceCatalog, uid: UUID
) -> None:
    """The hook that mounts what skills need: their built-in tools join ``context.tools``
    and their MCP servers join ``context.mcps`` (the servers the run may connect to),
    each only when the user may use it. ``resolved.skill_mounts`` records, per skill, those the
    agent's own selection did not hold: they stay hidden until the skill is activated."""
    wanted_tools = any(skill.tools for skill in skills)
    wanted_mcps = any(skill.mcps for skill in skills)
    tools_allowed = set(await catalog.accessible(TOOLS, uid)) if wanted_tools else set()
    mcps_allowed = set(await catalog.accessible(MCP_SERVERS, uid)) if wanted_mcps else set()
    own_tools = set(context.tools or [])
    own_mcps = set(context.mcps or [])
    mounts: dict[str, dict[str, list[str]]] = {}
    tools = list(context.tools or [])
    mcps = list(context.mcps or [])
    for skill in skills:
        extra_tools = [t for t in skill.tools if t in tools_allowed and t not in own_tools]
        extra_mcps = [m for m in skill.mcps if m in mcps_allowed and m not in own_mcps]
        mounts[skill.slug] = {"tools": extra_tools, "mcps": extra_mcps}
        tools += [t for t in extra_tools if t not in tools]
        mcps += [m for m in extra_mcps if m not in mcps]
    context.tools = tools
    context.mcps = mcps
    context.resolved.skill_mounts = mounts
