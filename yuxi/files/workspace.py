"""The user's workspace: the files that shape a run (agents/AGENTS.md, USER.md,
MEMORY.md), how they are written, and how its paths are shown to clients.

A missing, unreadable, non-regular or symlinked file never blocks a run: it is simply
not used. Each file contributes at most 64 KiB; longer files are cut with a visible
notice so the model (and the user reading the manifest digest) knows. HTML comments
(``<!-- ... -->``) are notes for the user: they are dropped before a file reaches a
prompt, so the template a new workspace gets (comments only) changes nothing.

Writes (the API's PUT, the memory tools) are atomic: a temporary file in the same
directory, then ``os.replace``. Nothing is followed: an ``agents`` directory or a target
that is a symbolic link is refused.

Host paths stay on the server: the Context keeps absolute paths for the tools, and what
leaves the server (events, error messages) shows a path relative to the user's workspace
(``threads/<thread_id>``, ``projects/<name>``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePath

import msgspec

PROMPT_LIMIT = 64 * 1024
AGENTS_DIR = "agents"
AGENTS_FILE = "agents/AGENTS.md"
PROMPT_FILES = (AGENTS_FILE, "agents/USER.md")
MEMORY_FILE = "agents/MEMORY.md"
WORKSPACE_FILES = (*PROMPT_FILES, MEMORY_FILE)
"""The files a user reads and writes through the API, and nothing else."""

AGENTS_TEMPLATE = """\
<!--
agents/AGENTS.md: standing instructions for every agent you run in this workspace.

Write here what should hold in every conversation (how you like answers, the
conventions of your projects). yuxi appends this file to each agent's system prompt,
then agents/USER.md. One-off requests belong in the conversation instead.

Text inside HTML comments like this one is a note for you: agents never see it.
At most 64 KiB of this file is used.
-->
"""
"""What a new workspace's agents/AGENTS.md holds: comments only, so no prompt changes."""

# terminated comments only: a stray "<!--" hides nothing
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@dataclass(frozen=True)
class WorkspaceFile:
    """What was read from one file: its text (possibly cut) and a digest of the bytes read."""

    name: str
    text: str
    sha256: str
    bytes_read: int
    truncated: bool


def read_workspace_file(root: Path, name: str, limit: int = PROMPT_LIMIT) -> WorkspaceFile | None:
    """Reads ``root/name`` without following symlinks; None when it cannot or is empty."""
    path = root / name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None  # missing, unreadable, or a symlink (O_NOFOLLOW)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    truncated = len(data) > limit
    data = data[:limit]
    text = without_comments(data.decode("utf-8", errors="ignore")).strip()
    if not text:
        return None
    if truncated:
        text += f"\n\n[{name} was cut at {limit // 1024} KiB; the rest is not shown]"
    return WorkspaceFile(name, text, hashlib.sha256(data).hexdigest(), len(data), truncated)


def without_comments(text: str) -> str:
    """``text`` without its HTML comments (notes for the user, not for agents)."""
    return _COMMENT.sub("", text) if "<!--" in text else text


def read_prompt_files(root: Path) -> list[WorkspaceFile]:
    """agents/AGENTS.md then agents/USER.md, those that are usable."""
    files = (read_workspace_file(root, name) for name in PROMPT_FILES)
    return [f for f in files if f is not None]


def workspace_prompt(files: list[WorkspaceFile]) -> str:
    return "\n\n".join(f.text for f in files)


def client_path(workspace: Path, path: str | PurePath) -> str | None:
    """How ``path`` is shown to clients: relative to the user's ``workspace``, in POSIX
    form (``threads/<thread_id>``, ``projects/<name>``, ``.`` for the workspace itself);
    None for a path outside the workspace, whose host location is not theirs to see."""
    try:
        relative = PurePath(os.path.normpath(path)).relative_to(workspace)
    except ValueError:
        return None
    return relative.as_posix()


@dataclass
class ClientPaths:
    """The host locations one run knows, and how texts that leave the server show them."""

    home: Path
    workspace: Path
    # known once the Context is prepared; only matters when it lies outside the workspace
    workdir: str | None = None
    # the run's model key, once opened: a provider error that echoes it must not
    # carry it into an event, a run's error or a log line
    secrets: list[str] = field(default_factory=list, repr=False)

    def show(self, path: str | PurePath) -> str | None:
        """``path`` as clients see it (see ``client_path``)."""
        return client_path(self.workspace, path)

    def hide(self, text: str) -> str:
        """``text`` (an error message) with secrets replaced by ``***`` and host paths
        replaced: those inside the user's workspace become relative to it, the workdir
        elsewhere ``<workdir>``, anything else under YUXI_HOME ``<home>``."""
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        if self.workdir and self.show(self.workdir) is None:
            text = _replace_path(text, self.workdir, "<workdir>")
        text = _replace_path(text, str(self.workspace), "")
        return _replace_path(text, str(self.home), "<home>")


def _replace_path(text: str, prefix: str, shown: str) -> str:
    if prefix not in text:  # the usual case: no regular expression to build
        return text
    # the prefix as whole path components: "/a/b" must not match inside "/a/bc"
    pattern = re.compile(re.escape(prefix.rstrip("/")) + r"(/|(?![\w.-]))")

    def replacement(match: re.Match[str]) -> str:
        if match.group(1) == "/":
            return f"{shown}/" if shown else ""
        return shown or "."

    return pattern.sub(replacement, text)


# -- writing ----------------------------------------------------------------------------


class WorkspaceFileRefused(ValueError):
    """A workspace file cannot be read or written as asked; the message names the file
    relative to the workspace, never a host path."""


class SavedWorkspaceFile(msgspec.Struct, frozen=True):
    """A workspace file as written: what ``PUT /api/workspace/files/{name}`` answers."""

    name: str
    bytes: int
    sha256: str
    updated_at: datetime


def ensure_agents_template(root: Path) -> bool:
    """Gives a workspace without an ``agents/`` directory one, holding the
    ``AGENTS_TEMPLATE``; True when it did. An existing ``agents`` (a directory, a file or
    a symlink) is left as it is, and a workspace that cannot be written is not an error:
    the template is a convenience, never a reason for a run or a read to fail."""
    agents = root / AGENTS_DIR
    if os.path.lexists(agents):
        return False
    try:
        agents.mkdir(parents=True)
        fd = os.open(
            agents / "AGENTS.md", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644
        )
    except OSError:  # another process was first, or the workspace is read-only
        return False
    with os.fdopen(fd, "wb") as handle:
        handle.write(AGENTS_TEMPLATE.encode())
    return True


def read_workspace_bytes(root: Path, name: str, limit: int = -1) -> bytes | None:
    """The bytes of ``root/name`` (at most ``limit`` of them, when given); None when it is
    missing, a symlink (or under one), or not a regular file."""
    try:
        with _agents_dir(root, name, create=False) as (dir_fd, base):
            fd = os.open(base, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
            with os.fdopen(fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                    return None
                return handle.read(limit)
    except (OSError, WorkspaceFileRefused):
        return None


def write_workspace_file(root: Path, name: str, data: bytes) -> SavedWorkspaceFile:
    """Replaces ``root/name`` with ``data`` atomically (creating ``agents/``); refuses
    (``WorkspaceFileRefused``) data over ``PROMPT_LIMIT`` and a target or ``agents``
    directory that is a symbolic link or not a regular file / directory."""
    _check_size(name, len(data))
    with _agents_dir(root, name, create=True) as (dir_fd, base):
        _check_target(dir_fd, base, name, must_exist=False)
        return _replace(dir_fd, base, name, data)


def edit_workspace_file(root: Path, name: str, change: Callable[[str], str]) -> SavedWorkspaceFile:
    """Replaces the text of the existing ``root/name`` with ``change(text)``, atomically
    and under an exclusive lock on ``agents/`` (concurrent edits, from any process on
    this host, apply one after another). Refuses (``WorkspaceFileRefused``) a missing,
    symlinked or non-UTF-8 file and a result over ``PROMPT_LIMIT``, changing nothing;
    ``change`` may raise ``WorkspaceFileRefused`` too."""
    with _agents_dir(root, name, create=False) as (dir_fd, base):
        fcntl.flock(dir_fd, fcntl.LOCK_EX)
        _check_target(dir_fd, base, name, must_exist=True)
        try:
            text = _read_at(dir_fd, base, name).decode("utf-8")
        except UnicodeDecodeError:
            raise WorkspaceFileRefused(f"{name} is not valid UTF-8 text") from None
        data = change(text).encode("utf-8")
        _check_size(name, len(data))
        return _replace(dir_fd, base, name, data)


@contextlib.contextmanager
def _agents_dir(root: Path, name: str, *, create: bool) -> Iterator[tuple[int, str]]:
    """An open descriptor of ``root/agents`` (never through a symlink) and the file's
    base name inside it."""
    directory, _, base = name.partition("/")
    if directory != AGENTS_DIR or not base or "/" in base or name not in WORKSPACE_FILES:
        raise WorkspaceFileRefused(f"{name} is not a workspace file")
    try:
        if create:
            root.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                (root / AGENTS_DIR).mkdir()
        fd = os.open(root / AGENTS_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise WorkspaceFileRefused(f"{name} does not exist") from None
    except OSError as error:  # ELOOP: a symlink; ENOTDIR: a file
        raise WorkspaceFileRefused(
            f"{AGENTS_DIR}/ is a symbolic link or not a directory; it is never followed"
        ) from error
    try:
        yield fd, base
    finally:
        os.close(fd)  # also releases a lock taken on it


def _check_target(dir_fd: int, base: str, name: str, *, must_exist: bool) -> None:
    try:
        mode = os.lstat(base, dir_fd=dir_fd).st_mode
    except FileNotFoundError:
        if must_exist:
            raise WorkspaceFileRefused(f"{name} does not exist") from None
        return
    if stat.S_ISLNK(mode):
        raise WorkspaceFileRefused(f"{name} is a symbolic link; it is never followed")
    if not stat.S_ISREG(mode):
        raise WorkspaceFileRefused(f"{name} is not a regular file")


def _check_size(name: str, size: int) -> None:
    if size > PROMPT_LIMIT:
        raise WorkspaceFileRefused(
            f"{name} would be {size} bytes; the limit is {PROMPT_LIMIT} bytes (64 KiB)"
        )


def _read_at(dir_fd: int, base: str, name: str) -> bytes:
    fd = os.open(base, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(PROMPT_LIMIT + 1)
    if len(data) > PROMPT_LIMIT:
        raise WorkspaceFileRefused(f"{name} is over {PROMPT_LIMIT} bytes (64 KiB)")
    return data


def _replace(dir_fd: int, base: str, name: str, data: bytes) -> SavedWorkspaceFile:
    """Writes ``data`` to a temporary file next to ``base``, then renames it over
    ``base`` (a rename replaces a symlink itself, never what it points to)."""
    temporary = f".{base}.{secrets.token_hex(6)}.tmp"
    fd = os.open(
        temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd
    )
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            modified = os.fstat(handle.fileno()).st_mtime
        os.replace(temporary, base, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)  # the rename survives a crash
    return SavedWorkspaceFile(
        name, len(data), hashlib.sha256(data).hexdigest(), datetime.fromtimestamp(modified, UTC)
    )
