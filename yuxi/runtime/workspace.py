"""The user's workspace files that shape a run: agents/AGENTS.md, USER.md, MEMORY.md.

A missing, unreadable, non-regular or symlinked file never blocks a run: it is simply
not used. Each file contributes at most 64 KiB; longer files are cut with a visible
notice so the model (and the user reading the manifest digest) knows.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

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
