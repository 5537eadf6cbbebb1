"""The user's workspace: the files that shape a run (agents/AGENTS.md, USER.md,
MEMORY.md), and how its paths are shown to clients.

A missing, unreadable, non-regular or symlinked file never blocks a run: it is simply
not used. Each file contributes at most 64 KiB; longer files are cut with a visible
notice so the model (and the user reading the manifest digest) knows.

Host paths stay on the server: the Context keeps absolute paths for the tools, and what
leaves the server (events, error messages) shows a path relative to the user's workspace
(``threads/<thread_id>``, ``projects/<name>``).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePath

PROMPT_LIMIT = 64 * 1024
PROMPT_FILES = ("agents/AGENTS.md", "agents/USER.md")
MEMORY_FILE = "agents/MEMORY.md"


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
    text = data.decode("utf-8", errors="ignore").strip()
    if not text:
        return None
    if truncated:
        text += f"\n\n[{name} was cut at {limit // 1024} KiB; the rest is not shown]"
    return WorkspaceFile(name, text, hashlib.sha256(data).hexdigest(), len(data), truncated)


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

    def show(self, path: str | PurePath) -> str | None:
        """``path`` as clients see it (see ``client_path``)."""
        return client_path(self.workspace, path)

    def hide(self, text: str) -> str:
        """``text`` (an error message) with host paths replaced: those inside the user's
        workspace become relative to it, the workdir elsewhere ``<workdir>``, anything
        else under YUXI_HOME ``<home>``."""
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
