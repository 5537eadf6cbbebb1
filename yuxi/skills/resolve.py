"""Which skills one run has: the shared skills the user may use and their personal ones,
narrowed by the agent's ``skills``, closed over their dependencies, their files on disk
for the file tools, and what the prompt says of them.

Shadowing: a personal skill (``skills/<slug>/SKILL.md`` in the user's workspace) with
the slug of a shared skill replaces it for that user's runs, dependencies included: the
user's own copy wins, and the manifest says so (``source: personal``).

Dependencies: a skill the agent selects by name whose closure needs a skill the user
cannot use, or that closes a cycle, fails the run at preparation (``SkillError``).
When the agent leaves ``skills`` unset (every skill the user may use), such a broken
skill is left out instead, so that one bad skill does not stop every run.

Shared skills' files are written once under ``<YUXI_HOME>/skills/<sha256>/`` (named by
their digest: a version never changes, so a directory, once complete, stays right);
personal skills are read where they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yuxi.files.layout import skill_cache
from yuxi.skills.format import (
    SKILL_FILE,
    SkillFormatError,
    canonical_digest,
    check_relative,
    is_skill_slug,
    parse_skill_md,
    read_directory,
)

log = logging.getLogger(__name__)

PERSONAL_DIR = "skills"
INDEX_INTRO = (
    "You have these skills. Before a task one of them covers, call activate_skill with its"
    " name to read its instructions; its files are under skills/<name>/ (read-only):"
)
PRELOAD_LIMIT = 64 * 1024


class SkillError(RuntimeError):
    """A run's skills cannot be resolved: a missing dependency or a cycle."""


@dataclass(frozen=True)
class SkillRecord:
    """One skill a user may use, as the catalog or their workspace describes it."""

    slug: str
    source: str  # shared | personal
    description: str
    version: int | None = None
    sha256: str | None = None
    skills: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    mcps: tuple[str, ...] = ()
    root: Path | None = None  # a personal skill's directory

    def manifest_entry(self) -> dict[str, Any]:
        return {
            "slug": self.slug,
            "source": self.source,
            "version": self.version,
            "sha256": self.sha256,
        }


@dataclass
class RunSkills:
    """What preparation resolved: the skills in order, where their files are, the
    preloaded instructions' digests."""

    skills: list[SkillRecord] = field(default_factory=list)
    roots: dict[str, str] = field(default_factory=dict)
    preloaded: dict[str, dict[str, Any]] = field(default_factory=dict)
    prompt: str = ""

    def manifest_entries(self) -> list[dict[str, Any]]:
        return [skill.manifest_entry() for skill in self.skills]


def personal_skills(workspace: Path) -> list[SkillRecord]:
    """The skills in ``<workspace>/skills/<slug>/SKILL.md``, by slug. A directory whose
    name is not a slug, is a symbolic link, or whose SKILL.md is missing, malformed or
    names another skill is skipped (and logged)."""
    base = workspace / PERSONAL_DIR
    if not base.is_dir() or base.is_symlink():
        return []
    found: list[SkillRecord] = []
    for entry in sorted(base.iterdir(), key=lambda p: p.name):
        if not is_skill_slug(entry.name) or entry.is_symlink() or not entry.is_dir():
            continue
        try:
            files = read_directory(entry)
            raw = files.get(SKILL_FILE)
            if raw is None:
                continue
            meta = parse_skill_md(raw.decode("utf-8"))
            if meta.name != entry.name:
                raise SkillFormatError(f"SKILL.md names {meta.name}, not {entry.name}")
        except (SkillFormatError, UnicodeDecodeError, OSError) as error:
            log.info("personal skill %s skipped: %s", entry.name, error)
            continue
        found.append(
            SkillRecord(
                slug=meta.name,
                source="personal",
                description=meta.description,
                sha256=canonical_digest(files),
                skills=meta.skills,
                tools=meta.tools,
                mcps=meta.mcps,
                root=entry.resolve(),
            )
        )
    return found


def merge(shared: Sequence[SkillRecord], personal: Sequence[SkillRecord]) -> dict[str, SkillRecord]:
    """Every skill by slug, a personal one replacing a shared one of the same slug;
    shared first, then personal-only ones, each group by slug."""
    merged = {skill.slug: skill for skill in shared}
    for skill in personal:
        merged[skill.slug] = skill
    return merged


def closure(selected: Sequence[str], available: Mapping[str, SkillRecord]) -> list[str]:
    """``selected`` and everything they depend on, selection order first. SkillError for
    a dependency that is not available or a cycle (its path in the message)."""
    order: dict[str, None] = {}
    state: dict[str, str] = {}

    def visit(slug: str, path: tuple[str, ...]) -> None:
        if state.get(slug) == "done":
            return
        if state.get(slug) == "open":
            cycle = (*path[path.index(slug) :], slug)
            raise SkillError(f"skill dependency cycle: {' -> '.join(cycle)}")
        skill = available.get(slug)
        if skill is None:
            needed_by = f" (needed by {path[-1]})" if path else ""
            raise SkillError(f"skill {slug}{needed_by} is not available to this user")
        state[slug] = "open"
        for dep in skill.skills:
            visit(dep, (*path, slug))
        state[slug] = "done"

    for slug in selected:
        visit(slug, ())
        order[slug] = None
    pending = list(selected)
    while pending:
        slug = pending.pop(0)
        order.setdefault(slug, None)
        pending.extend(dep for dep in available[slug].skills if dep not in order)
    return list(order)


def resolve_selection(
    selected: Sequence[str] | None, available: Mapping[str, SkillRecord]
) -> list[str]:
    """The run's skills: an explicit selection must resolve (SkillError otherwise);
    unset takes every available skill whose closure resolves."""
    if selected is not None:
        return closure([s for s in dict.fromkeys(selected) if s in available], available)
    usable: list[str] = []
    for slug in available:
        try:
            closure([slug], available)
        except SkillError as error:
            log.info("skill %s left out of the run: %s", slug, error)
            continue
        usable.append(slug)
    return usable


FetchFiles = Callable[
    [Sequence[tuple[str, int]]], Awaitable[Mapping[tuple[str, int], Mapping[str, bytes]]]
]
"""Reads the files of shared skill versions ``[(slug, version)]`` at once."""


async def shared_roots(
    home: Path, skills: Sequence[SkillRecord], fetch: FetchFiles
) -> dict[str, Path]:
    """The directories of shared skill versions whose files are not under the home yet,
    read in one call and written in one trip to a worker thread."""
    wanted = [s for s in skills if s.sha256 is not None and s.version is not None]
    if not wanted:
        return {}
    files = await fetch([(s.slug, s.version) for s in wanted if s.version is not None])

    def write() -> dict[str, Path]:
        written: dict[str, Path] = {}
        for skill in wanted:
            assert skill.sha256 is not None and skill.version is not None
            target = skill_cache(home) / skill.sha256
            content = files.get((skill.slug, skill.version))
            if not target.is_dir() and content:
                _write_tree(target, content)
            if target.is_dir():
                written[skill.slug] = target
        return written

    return await asyncio.to_thread(write)


def scan_skills(
    workspace: Path, home: Path, shared: Sequence[SkillRecord]
) -> tuple[list[SkillRecord], set[str]]:
    """The user's personal skills, and the digests of the shared skills whose files are
    already under the home (blocking: call it in a worker thread)."""
    cache = skill_cache(home)
    present = {s.sha256 for s in shared if s.sha256 and (cache / s.sha256).is_dir()}
    return personal_skills(workspace), present


def _write_tree(target: Path, files: Mapping[str, bytes]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".skill-", dir=target.parent))
    try:
        for name, data in files.items():
            path = staging / check_relative(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        try:
            os.rename(staging, target)
        except OSError:
            if not target.is_dir():  # not another worker's identical copy: a real failure
                raise
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)


def skill_body(root: Path) -> str:
    """The instructions of a skill (its SKILL.md after the front matter)."""
    raw = (root / SKILL_FILE).read_bytes()[:PRELOAD_LIMIT]
    try:
        return parse_skill_md(raw.decode("utf-8", "replace")).body
    except SkillFormatError:
        return raw.decode("utf-8", "replace")


def index_prompt(skills: Sequence[SkillRecord]) -> str:
    """The compact index the model sees: one line per skill, name and description."""
    if not skills:
        return ""
    lines = [INDEX_INTRO]
    lines += [f"- {s.slug}: {' '.join(s.description.split())}" for s in skills]
    return "\n".join(lines)


def preload(
    roots: Mapping[str, str], slugs: Sequence[str]
) -> tuple[str, dict[str, dict[str, Any]]]:
    """The instructions of the skills marked for preloading, as prompt text, and the
    sha256 and size of each one's bytes (for the manifest)."""
    parts: list[str] = []
    digests: dict[str, dict[str, Any]] = {}
    for slug in slugs:
        root = roots.get(slug)
        if root is None:
            continue
        body = skill_body(Path(root))
        data = body.encode()
        digests[slug] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
        parts.append(f'<skill name="{slug}">\n{body}\n</skill>')
    return "\n\n".join(parts), digests


async def prepare_skills(
    selected: Sequence[str] | None,
    preload_selected: Sequence[str],
    *,
    shared: Sequence[SkillRecord],
    scanned: tuple[list[SkillRecord], set[str]],
    home: Path,
    fetch: FetchFiles,
) -> RunSkills:
    """Resolves one run's skills (see the module's rules) and readies their files.
    ``scanned``: what ``scan_skills`` found (the caller reads it on its own trip to a
    worker thread); preloads take one more trip."""
    personal, present = scanned
    available = merge(shared, personal)
    slugs = resolve_selection(selected, available)
    resolved = RunSkills(skills=[available[slug] for slug in slugs])
    missing: list[SkillRecord] = []
    for skill in resolved.skills:
        if skill.root is not None:
            resolved.roots[skill.slug] = str(skill.root)
        elif skill.sha256 is not None and skill.sha256 in present:
            resolved.roots[skill.slug] = str(skill_cache(home) / skill.sha256)
        else:
            missing.append(skill)
    written = await shared_roots(home, missing, fetch)
    resolved.roots.update({slug: str(path) for slug, path in written.items()})
    preload_slugs = [s for s in dict.fromkeys(preload_selected) if s in resolved.roots]
    text = ""
    if preload_slugs:
        text, resolved.preloaded = await asyncio.to_thread(preload, resolved.roots, preload_slugs)
    resolved.prompt = "\n\n".join(p for p in (index_prompt(resolved.skills), text) if p)
    return resolved


def shared_records(rows: Sequence[Any]) -> list[SkillRecord]:
    """SkillRecords of ``yuxi.skills_usable`` rows (``SkillInfo``)."""
    return [
        SkillRecord(
            slug=row.slug,
            source="shared",
            description=row.description,
            version=row.version,
            sha256=row.sha256,
            skills=tuple(row.depends_skills),
            tools=tuple(row.depends_tools),
            mcps=tuple(row.depends_mcps),
        )
        for row in rows
    ]


def catalog_records(
    slugs: Sequence[str], dependencies: Mapping[str, Sequence[str]]
) -> list[SkillRecord]:
    """SkillRecords of a catalog that only names skills (no files, no digests)."""
    return [
        SkillRecord(slug=s, source="catalog", description=s, skills=tuple(dependencies.get(s, ())))
        for s in slugs
    ]
