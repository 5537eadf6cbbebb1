"""A worker's local copy of the file trees its runs work on: the database is the truth,
the directory under ``$YUXI_HOME`` is a cache.

Before a run the worker brings the trees it needs up to date (``TreeCache.pull``): the
claim says each tree's version, and a cache that saw that version does nothing; else
it lists the tree and fetches only the files whose digest changed, and removes the
files the tree no longer has. Writes go through (``wrote``: the file is in the store
before the tool that wrote it returns), and what a process wrote into the directory
directly is sent back by ``push``, which compares each file's size and modification
time with what the cache last saw.

What the cache saw is kept outside the directory, in ``<home>/cache/files/<tree>.json``
(the agent never sees it), under a lock file beside it, so the runs of several
processes sharing one ``$YUXI_HOME`` take turns on a tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import uuid
import weakref
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from yuxi.files.store import FileStore
from yuxi.files.workdir import media_type
from yuxi.queue.files import FileInfo

log = logging.getLogger("yuxi.files")

CACHE_DIR = "cache/files"
# a path the store takes (sql: yuxi.file_path_is_valid)
_COMPONENT = re.compile(r"[^/\\\x00-\x1f\x7f]{1,255}")
_READ_BYTES = 1024 * 1024

# one turn per cache directory in this process (see DirectoryCache._locked)
_turns: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()


def _turn(lock_path: Path) -> asyncio.Lock:
    turn = _turns.get(str(lock_path))
    if turn is None:
        turn = _turns[str(lock_path)] = asyncio.Lock()
    return turn


def storable(path: str) -> bool:
    """Whether ``path`` (relative, "/"-separated) is one the store takes."""
    parts = path.split("/")
    return (
        len(path.encode()) <= 1024
        and all(_COMPONENT.fullmatch(p) and p not in (".", "..") for p in parts)
        and all(len(p.encode()) <= 255 for p in parts)
    )


@dataclass
class _Seen:
    """What the cache last saw: the tree's version, and each file's digest with the size
    and modification time of the local copy it wrote or read."""

    version: int = -1
    files: dict[str, tuple[str, int, int]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> _Seen:
        try:
            raw = json.loads(path.read_bytes())
            return cls(int(raw["version"]), {k: tuple(v) for k, v in raw["files"].items()})
        except (OSError, ValueError, KeyError, TypeError):
            return cls()

    def save(self, path: Path) -> None:
        temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        temporary.write_text(json.dumps({"version": self.version, "files": self.files}))
        os.replace(temporary, path)


# What this process last saw of each tree (a copy of its file under the lock): a run
# whose claim names the version seen here, or that changed nothing, takes no lock and
# reads no file. Another process on this host only ever makes the directory newer, and
# the version says so.
_MEMO: dict[UUID, _Seen] = {}


@dataclass(frozen=True)
class Synced:
    """What one sync did."""

    fetched: int = 0
    removed: int = 0
    sent: int = 0


class TreeCache:
    """The local copy of one store tree (of ``owner``) in ``directory``. ``skip``: top-level
    directories that belong to other trees (a workspace's ``threads/`` and
    ``projects/`` are workdirs of their own)."""

    def __init__(
        self,
        store: FileStore,
        home: Path,
        owner: UUID,
        tree: UUID,
        directory: Path,
        *,
        skip: tuple[str, ...] = (),
    ) -> None:
        self.store = store
        self.owner = owner
        self.tree = tree
        self.directory = directory
        self.skip = skip
        cache = home / CACHE_DIR
        self._seen_path = cache / f"{tree}.json"
        self._lock_path = cache / f"{tree}.lock"

    async def pull(self, version: int) -> Synced:
        """Brings the directory up to ``version`` of the tree (nothing to do when the
        cache saw it already)."""
        memo = _MEMO.get(self.tree)
        if memo is not None and memo.version == version:
            return Synced()
        async with self._locked() as seen:
            if seen.version == version:
                return Synced()
            files = await self.store.list(self.tree)
            fetched = removed = 0
            wanted = {f.path: f for f in files if not self._skipped(f.path)}
            # which local copies are current, in one trip to a worker thread
            stale = await asyncio.to_thread(
                lambda: [f for f in wanted.values() if not self._current(seen, f.path, f.sha256)]
            )
            for info in stale:
                await self._fetch(info, seen)
                fetched += 1
            for path in [p for p in seen.files if p not in wanted]:
                await asyncio.to_thread(self._remove, path)
                del seen.files[path]
                removed += 1
            seen.version = version
            return Synced(fetched=fetched, removed=removed)

    async def wrote(
        self, path: str, *, writer_uid: UUID | None = None, writer_run: UUID | None = None
    ) -> FileInfo | None:
        """Sends the local file at ``path`` to the store now (a tool's write); None for
        a path the store does not take or a file that is gone."""
        if not storable(path):
            return None
        async with self._locked() as seen:
            return await self._send(path, seen, writer_uid=writer_uid, writer_run=writer_run)

    async def stored(self, path: str, data: bytes, info: FileInfo) -> None:
        """Puts ``data``, just written to the store as ``info``, in the local copy too."""
        async with self._locked() as seen:
            target = self._local(path)
            await asyncio.to_thread(_write_local, self.directory, target, data)
            st = os.lstat(target)
            seen.files[path] = (info.sha256, st.st_size, st.st_mtime_ns)

    async def push(
        self, *, writer_uid: UUID | None = None, writer_run: UUID | None = None
    ) -> Synced:
        """Sends back what changed in the directory since the cache last saw it: new or
        changed files are written, removed ones deleted from the tree."""
        local = await asyncio.to_thread(self._walk)
        memo = _MEMO.get(self.tree)
        if memo is not None and _unchanged(local, memo):
            return Synced()
        async with self._locked() as seen:
            local = await asyncio.to_thread(self._walk)
            sent = removed = 0
            for path, (size, mtime) in local.items():
                known = seen.files.get(path)
                if known is not None and known[1:] == (size, mtime):
                    continue
                if await self._send(path, seen, writer_uid=writer_uid, writer_run=writer_run):
                    sent += 1
            for path in [p for p in seen.files if p not in local]:
                await self.store.delete(self.tree, path)
                del seen.files[path]
                removed += 1
            return Synced(sent=sent, removed=removed)

    # -- inside the lock ------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _locked(self) -> AsyncIterator[_Seen]:
        # This process's runs take turns first; only then does one wait in flock, for
        # another process. Without the turn, runs of one tree waiting in flock held every
        # thread of the loop's executor, and the run holding the lock got none to go on
        # with (its to_thread calls waited behind them): every run of the process stuck.
        async with _turn(self._lock_path), self._flocked() as seen:
            yield seen

    @contextlib.asynccontextmanager
    async def _flocked(self) -> AsyncIterator[_Seen]:
        self._seen_path.parent.mkdir(parents=True, exist_ok=True)
        fd = await asyncio.to_thread(os.open, self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
            seen = await asyncio.to_thread(_Seen.load, self._seen_path)
            before = (seen.version, dict(seen.files))
            try:
                yield seen
            finally:
                if (seen.version, seen.files) != before:
                    await asyncio.to_thread(seen.save, self._seen_path)
                _MEMO[self.tree] = _Seen(seen.version, dict(seen.files))
        finally:
            os.close(fd)  # closing releases the lock

    def _skipped(self, path: str) -> bool:
        return path.split("/", 1)[0] in self.skip

    def _local(self, path: str) -> Path:
        return self.directory / path

    def _current(self, seen: _Seen, path: str, sha256: str) -> bool:
        known = seen.files.get(path)
        if known is None or known[0] != sha256:
            return False
        try:
            st = os.lstat(self._local(path))
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and (st.st_size, st.st_mtime_ns) == known[1:]

    async def _fetch(self, info: FileInfo, seen: _Seen) -> None:
        target = self._local(info.path)
        await asyncio.to_thread(_prepare_parent, self.directory, target)
        temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}.part")
        fd = await asyncio.to_thread(
            os.open, temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644
        )
        try:
            with os.fdopen(fd, "wb") as handle:
                async for piece in self.store.stream(info):
                    await asyncio.to_thread(handle.write, piece)
            await asyncio.to_thread(os.replace, temporary, target)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise
        st = os.lstat(target)
        seen.files[info.path] = (info.sha256, st.st_size, st.st_mtime_ns)

    def _remove(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, NotADirectoryError):
            os.unlink(self._local(path))

    async def _send(
        self, path: str, seen: _Seen, *, writer_uid: UUID | None, writer_run: UUID | None
    ) -> FileInfo | None:
        local = self._local(path)
        try:
            fd = await asyncio.to_thread(os.open, local, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as handle:
            st = os.fstat(handle.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None
            known = seen.files.get(path)
            digest = await asyncio.to_thread(_digest_of, handle)
            if known is not None and known[0] == digest:
                seen.files[path] = (digest, st.st_size, st.st_mtime_ns)
                return None  # touched, not changed
            handle.seek(0)
            async with self.store.upload(self.owner) as upload:
                while piece := await asyncio.to_thread(handle.read, _READ_BYTES):
                    await upload.write(piece)
                info = await upload.put(
                    self.tree,
                    path,
                    media_type=media_type(local.name),
                    writer_uid=writer_uid,
                    writer_run=writer_run,
                )
        seen.files[path] = (info.sha256, st.st_size, st.st_mtime_ns)
        return info

    def _walk(self) -> dict[str, tuple[int, int]]:
        """Every regular file under the directory (no symlinks followed), by path."""
        found: dict[str, tuple[int, int]] = {}
        for path, st in _regular_files(self.directory, ""):
            if not self._skipped(path) and storable(path):
                found[path] = (st.st_size, st.st_mtime_ns)
        return found


def _unchanged(local: dict[str, tuple[int, int]], seen: _Seen) -> bool:
    return local.keys() == seen.files.keys() and all(
        seen.files[path][1:] == stamp for path, stamp in local.items()
    )


def _regular_files(root: Path, prefix: str) -> Iterator[tuple[str, os.stat_result]]:
    try:
        entries = list(os.scandir(root / prefix if prefix else root))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        path = f"{prefix}/{entry.name}" if prefix else entry.name
        if entry.name.endswith(".part") and entry.name.startswith("."):
            continue  # a fetch of this cache under way
        if entry.is_dir(follow_symlinks=False):
            yield from _regular_files(root, path)
        elif entry.is_file(follow_symlinks=False):
            yield path, entry.stat(follow_symlinks=False)


def _write_local(root: Path, target: Path, data: bytes) -> None:
    _prepare_parent(root, target)
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}.part")
    temporary.write_bytes(data)
    os.replace(temporary, target)


def _digest_of(handle: Any) -> str:
    digest = hashlib.sha256()
    while piece := handle.read(_READ_BYTES):
        digest.update(piece)
    return digest.hexdigest()


def _prepare_parent(root: Path, target: Path) -> None:
    """Makes ``target``'s parent directories inside ``root``; a file or a link in the way
    (a directory the store now has where a file was) is removed."""
    root.mkdir(parents=True, exist_ok=True)
    current = root
    for part in target.relative_to(root).parts[:-1]:
        current = current / part
        if current.is_symlink() or (current.exists() and not current.is_dir()):
            current.unlink()
        current.mkdir(exist_ok=True)
    if target.is_symlink() or target.is_dir():
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()
