"""A conversation's workdir as clients see it: paths they send confined to it, listings
of what is in it, and the names and media types of the files they upload.

Every path a client sends is relative to the workdir. It is refused (``BadPath``) when
it is absolute, names ``..``, holds a NUL or a backslash, is overlong, or resolves
(symlinks followed) to a place outside the workdir. Paths sent back are relative to
the workdir, in POSIX form: no host path ever leaves the server.
"""

from __future__ import annotations

import mimetypes
import os
import stat
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from yuxi.queue.errors import InvalidInput

UPLOADS = "uploads"
OUTPUTS = "outputs"
# staging files of uploads in progress (yuxi/files/attachments.py), never listed
STAGING_PREFIX = ".upload-"
MAX_PATH_BYTES = 1024
MAX_NAME_BYTES = 255
MAX_ENTRIES = 1000


class BadPath(InvalidInput):
    """A client path that cannot name anything inside the workdir (400 ``invalid_input``)."""


@dataclass(frozen=True)
class Entry:
    """One entry of a listing. ``kind``: file, directory, or symlink (a link that
    leads outside the workdir: listed, never followed)."""

    name: str
    path: str
    kind: str
    bytes: int | None
    modified: datetime | None
    media_type: str | None


def client_relative(raw: str) -> PurePosixPath:
    """``raw`` checked as a relative path (``""`` and ``"."`` are the workdir itself)."""
    if "\x00" in raw:
        raise BadPath("a path cannot contain a NUL character")
    if "\\" in raw:
        raise BadPath("use / to separate path components")
    if len(raw.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise BadPath(f"a path is at most {MAX_PATH_BYTES} bytes")
    if raw.startswith("/") or raw.startswith("~"):
        raise BadPath("paths are relative to the conversation's workdir")
    parts = [part for part in raw.split("/") if part not in ("", ".")]
    if any(part == ".." for part in parts):
        raise BadPath("a path cannot name '..'")
    if any(len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES for part in parts):
        raise BadPath(f"a path component is at most {MAX_NAME_BYTES} bytes")
    return PurePosixPath(*parts) if parts else PurePosixPath(".")


def confined(root: Path, raw: str) -> Path:
    """The host path ``raw`` names inside ``root`` (resolved: symlinks followed). It need
    not exist; BadPath when it is malformed or leads outside ``root``."""
    relative = client_relative(raw)
    base = root.resolve()
    try:
        target = (base / relative).resolve()
    except (OSError, RuntimeError) as error:  # a symlink loop
        raise BadPath(f"cannot resolve {raw}") from error
    if not target.is_relative_to(base):
        raise BadPath(f"{raw} leads outside the conversation's workdir")
    return target


def shown(root: Path, path: Path) -> str:
    """``path`` (inside ``root``) as a client sees it."""
    relative = path.relative_to(root.resolve())
    return relative.as_posix() if relative.parts else "."


def media_type(name: str, declared: str | None = None) -> str:
    """The media type of a file called ``name``: by its extension, else what the client
    declared (when well-formed), else application/octet-stream."""
    guessed, _encoding = mimetypes.guess_type(name, strict=False)
    candidate = (guessed or declared or "").split(";")[0].strip().lower()
    if candidate.count("/") == 1 and all(
        part and all(c.isalnum() or c in ".+-" for c in part) for part in candidate.split("/")
    ):
        return candidate
    return "application/octet-stream"


def _entry(root: Path, path: Path) -> Entry | None:
    try:
        info = path.lstat()
    except OSError:
        return None  # gone meanwhile
    relative = path.relative_to(root).as_posix()
    if stat.S_ISLNK(info.st_mode):
        try:
            target = path.resolve()
            if not target.is_relative_to(root):
                return Entry(path.name, relative, "symlink", None, None, None)
            info = target.stat()
        except (OSError, RuntimeError):
            return Entry(path.name, relative, "symlink", None, None, None)
    modified = datetime.fromtimestamp(info.st_mtime, UTC)
    if stat.S_ISDIR(info.st_mode):
        return Entry(path.name, relative, "directory", None, modified, None)
    if stat.S_ISREG(info.st_mode):
        return Entry(path.name, relative, "file", info.st_size, modified, media_type(path.name))
    return None  # sockets, fifos, devices: nothing a viewer can show


def list_directory(root: Path, directory: Path) -> tuple[list[Entry], bool]:
    """The entries of ``directory`` (inside the resolved ``root``), directories first,
    then by name; at most MAX_ENTRIES, and whether more were left out."""
    entries: list[Entry] = []
    with os.scandir(directory) as scan:
        names = sorted(item.name for item in scan if not _hidden(directory, root, item.name))
    for name in names:
        entry = _entry(root, directory / name)
        if entry is not None:
            entries.append(entry)
    entries.sort(key=lambda e: (e.kind != "directory", e.name))
    return entries[:MAX_ENTRIES], len(entries) > MAX_ENTRIES


def walk_files(root: Path, top: Path) -> tuple[list[Entry], bool]:
    """Every regular file under ``top`` (inside the resolved ``root``), by path, without
    following symlinks; at most MAX_ENTRIES, and whether more were left out."""
    found: list[Entry] = []
    if not top.is_dir():
        return found, False
    for directory, subdirs, files in os.walk(top):
        current = Path(directory)
        subdirs.sort()
        for name in sorted(files):
            if _hidden(current, root, name):
                continue
            path = current / name
            if path.is_symlink():
                continue
            entry = _entry(root, path)
            if entry is not None and entry.kind == "file":
                found.append(entry)
                if len(found) > MAX_ENTRIES:
                    return found[:MAX_ENTRIES], True
    return found, False


def _hidden(directory: Path, root: Path, name: str) -> bool:
    return name.startswith(STAGING_PREFIX) and directory == root / UPLOADS


def safe_filename(raw: str | None, *, fallback: str = "file") -> str:
    """An upload's name as stored in uploads/: its last path component, NFC, without
    control characters or leading dots and spaces, at most 255 bytes (the extension
    kept). Matches ``yuxi.attachment_name_is_valid``."""
    name = unicodedata.normalize("NFC", raw or "")
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in name if unicodedata.category(c)[0] != "C")
    name = name.strip().lstrip(". ").strip()
    if not name:
        name = fallback
    if len(name.encode()) > MAX_NAME_BYTES:
        stem, dot, ext = name.rpartition(".")
        ext = f".{ext}" if dot and len(ext.encode()) <= 16 else ""
        stem = stem if ext else name
        while len((stem + ext).encode()) > MAX_NAME_BYTES - 16:  # room for " (n)"
            stem = stem[:-1]
        name = stem.rstrip() + ext
    return name
