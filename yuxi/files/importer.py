"""Bringing the files of an install from before the file store into it.

Before, files lived under ``$YUXI_HOME``: ``workspaces/<uid>/`` (the workspace:
``agents/``, ``skills/``; its workdirs ``threads/<id>/`` and ``projects/<dir>/``) and
``knowledge/<kb_id>/<document_id>`` (knowledge-base originals). ``import_home`` copies
each into its tree, as a user would have stored it, once per home: a file already in
the store (same path) is kept as it is and counted as skipped, one whose user,
conversation or knowledge base is gone is skipped and said, and a marker
(``<home>/files-imported``) then makes later runs do nothing, so a worker's cache
(which lives in the same place) is never imported back over the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from psycopg_pool import AsyncConnectionPool

from yuxi.files.cache import storable
from yuxi.files.layout import KNOWLEDGE, PROJECTS, THREADS, WORKSPACES
from yuxi.files.store import WORKDIR, PostgresFileStore
from yuxi.files.workdir import media_type
from yuxi.queue.errors import NotFound, QueueError
from yuxi.queue.knowledge import kb_document_get, kb_get
from yuxi.queue.users import user_list

MARKER = "files-imported"
_READ_BYTES = 1024 * 1024


@dataclass
class ImportReport:
    imported: int = 0
    bytes: int = 0
    skipped: int = 0
    # why whole directories were left out: "<path>: <reason>"
    left_out: list[str] = field(default_factory=list)
    already: bool = False


def import_needed(home: Path) -> bool:
    """Whether ``home`` may hold files to import: not imported yet, and something there
    (a home without any is marked done at once)."""
    if (home / MARKER).exists():
        return False
    if (home / WORKSPACES).exists() or (home / KNOWLEDGE).exists():
        return True
    with contextlib.suppress(OSError):
        home.mkdir(parents=True, exist_ok=True)
        (home / MARKER).write_text("nothing to import\n")
    return False


async def import_home(
    pool: AsyncConnectionPool[Any], home: Path, *, progress: Callable[[str], None]
) -> ImportReport:
    """Imports the files under ``home`` into the store, once (see the module)."""
    report = ImportReport()
    marker = home / MARKER
    if marker.exists():
        report.already = True
        return report
    store = PostgresFileStore(pool)
    async with pool.connection() as conn:
        users = {row.id for row in await user_list(conn)}
    workspaces = home / WORKSPACES
    for directory in _children(workspaces):
        try:
            uid = UUID(directory.name)
        except ValueError:
            report.left_out.append(f"{WORKSPACES}/{directory.name}: not a user id")
            continue
        if uid not in users:
            report.left_out.append(f"{WORKSPACES}/{directory.name}: no such user")
            continue
        await _import_tree(
            store, report, progress, uid, await store.workspace_tree(uid), directory,
            skip=(THREADS, PROJECTS),
        )  # fmt: skip
        for thread in _children(directory / THREADS):
            try:
                tree = await store.workdir_tree(uid, UUID(thread.name))
            except (ValueError, NotFound):
                report.left_out.append(f"{_shown(home, thread)}: no such conversation")
                continue
            await _import_tree(store, report, progress, uid, tree, thread)
        for project in _children(directory / PROJECTS):
            if not storable(f"{PROJECTS}/{project.name}"):
                report.left_out.append(f"{_shown(home, project)}: a name the store refuses")
                continue
            tree = await store.tree(uid, WORKDIR, f"{PROJECTS}/{project.name}")
            await _import_tree(store, report, progress, uid, tree, project)
    for kb in _children(home / KNOWLEDGE):
        try:
            kb_id = UUID(kb.name)
            async with pool.connection() as conn:
                owner = (await kb_get(conn, None, kb_id)).uid
            tree = await store.kb_tree(kb_id)
        except (ValueError, NotFound):
            report.left_out.append(f"{_shown(home, kb)}: no such knowledge base")
            continue
        for document in _files(kb):
            try:
                async with pool.connection() as conn:
                    await kb_document_get(conn, None, kb_id, UUID(document.name))
            except (ValueError, NotFound):
                report.left_out.append(f"{_shown(home, document)}: no such document")
                continue
            await _import_file(store, report, progress, owner, tree, document.name, document)
    marker.write_text(f"{report.imported} files imported, {report.skipped} skipped\n")
    return report


async def _import_tree(
    store: PostgresFileStore,
    report: ImportReport,
    progress: Callable[[str], None],
    uid: UUID,
    tree: UUID,
    root: Path,
    *,
    skip: tuple[str, ...] = (),
) -> None:
    for path in await asyncio.to_thread(lambda: list(_walk(root, skip))):
        relative = path.relative_to(root).as_posix()
        if not storable(relative):
            report.left_out.append(f"{relative}: a name the store refuses")
            continue
        await _import_file(store, report, progress, uid, tree, relative, path)


async def _import_file(
    store: PostgresFileStore,
    report: ImportReport,
    progress: Callable[[str], None],
    owner: UUID,
    tree: UUID,
    relative: str,
    path: Path,
) -> None:
    if await store.get(tree, relative) is not None:
        report.skipped += 1
        return
    try:
        async with store.upload(owner) as upload:
            with path.open("rb") as handle:
                while piece := await asyncio.to_thread(handle.read, _READ_BYTES):
                    await upload.write(piece)
            await upload.put(tree, relative, media_type=media_type(path.name))
    except QueueError as error:  # over a limit, or refused: said, not fatal
        report.left_out.append(f"{relative}: {error}")
        return
    except OSError as error:
        report.left_out.append(f"{relative}: cannot be read ({error.strerror})")
        return
    report.imported += 1
    report.bytes += upload.size
    if report.imported % 100 == 0:
        progress(f"files: {report.imported} imported ({report.bytes} bytes) so far")


def _children(directory: Path) -> Iterator[Path]:
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False):
                yield Path(entry.path)


def _files(directory: Path) -> Iterator[Path]:
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            if entry.is_file(follow_symlinks=False) and not entry.name.startswith("."):
                yield Path(entry.path)


def _walk(root: Path, skip: tuple[str, ...]) -> Iterator[Path]:
    """Regular files under ``root`` (no symlinks followed, staging files left out)."""
    for current, dirs, files in os.walk(root):
        base = Path(current)
        if base == root:
            dirs[:] = [d for d in dirs if d not in skip]
        dirs[:] = [d for d in dirs if not (base / d).is_symlink()]
        for name in sorted(files):
            path = base / name
            if name.startswith(".upload-") or path.is_symlink() or not path.is_file():
                continue
            yield path


def _shown(home: Path, path: Path) -> str:
    return path.relative_to(home).as_posix()
