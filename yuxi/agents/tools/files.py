"""``list_files``, ``read_file``, ``write_file``: confined to the conversation's workdir.

A path is resolved (``..`` and symlinks followed) before it is checked, so nothing
outside the run's ``context.workdir`` can be listed, read or written.

A run with skills also sees a virtual, read-only ``skills/`` root: ``skills/<slug>/...``
names the files of the skill ``slug`` (``context.resolved.skill_roots``), confined to that
skill's directory the same way; ``write_file`` refuses it. It hides a ``skills/``
directory of the workdir for those runs.

In a worker's run the workdir is a cache of the store (yuxi/files/cache.py):
``write_file`` returns once the file is in the store (the run's ``files`` service).

The names in the tool signatures (``ToolRuntime``, ``BaseContext``) must stay
importable at module level, not under ``TYPE_CHECKING``: with postponed annotations
LangChain and LangGraph resolve them with ``typing.get_type_hints`` against this
module's globals to find the injected ``runtime`` argument.
"""

from __future__ import annotations

import asyncio
import posixpath
from pathlib import Path

from langchain.tools import ToolRuntime
from langchain_core.tools import StructuredTool, ToolException, tool

from yuxi.agents.context import BaseContext
from yuxi.agents.services import services

MAX_READ_BYTES = 256 * 1024
MAX_WRITE_BYTES = 4 * 1024 * 1024
MAX_LIST_ENTRIES = 1000


def _workdir(runtime: ToolRuntime[BaseContext], *, create: bool = False) -> Path:
    """The run's working directory, resolved (symlinks followed)."""
    raw = getattr(runtime.context, "workdir", None)
    if not raw:
        raise ToolException(
            "this conversation has no working directory; file tools are unavailable"
        )
    root = Path(raw)
    if create:
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ToolException(
                f"cannot create the conversation's working directory: {exc.strerror}"
            ) from None
    root = root.resolve()
    if not root.is_dir():
        raise ToolException("the conversation's working directory does not exist")
    return root


def _resolve(root: Path, path: str) -> Path:
    """``path`` resolved against ``root``; refused unless it stays inside ``root``.

    Relative paths are taken from ``root``; an absolute path is used as given. ``..``
    and symlinks are resolved before the check, so neither can lead outside.
    """
    if "\x00" in path:
        raise ToolException("invalid path: contains a NUL character")
    try:
        resolved = (root / path).resolve()
    except (OSError, RuntimeError, ValueError):  # e.g. a symlink loop
        raise ToolException(f"cannot resolve path {path}") from None
    if not resolved.is_relative_to(root):
        raise ToolException(f"path {path} is outside the conversation's working directory")
    return resolved


def _display(root: Path, resolved: Path, prefix: str = "") -> str:
    relative = resolved.relative_to(root).as_posix()
    if not prefix:
        return relative
    return prefix.rstrip("/") if relative == "." else prefix + relative


SKILLS_ROOT = "skills"


def _skill_path(runtime: ToolRuntime[BaseContext], path: str) -> tuple[str, str] | None:
    """``(slug, rest)`` when ``path`` is under the virtual ``skills/`` root of a run with
    skills (``slug`` empty for ``skills`` itself); None otherwise."""
    # a graph run outside a worker may have no Context at all
    resolved = getattr(runtime.context, "resolved", None)
    roots = resolved.skill_roots if resolved is not None else None
    if not roots or path.startswith("/") or "\x00" in path:
        return None
    normal = posixpath.normpath(path)
    if normal != SKILLS_ROOT and not normal.startswith(SKILLS_ROOT + "/"):
        return None
    _root, _sep, rest = normal.partition("/")
    slug, _sep, inner = rest.partition("/")
    return slug, inner or "."


def _locate(runtime: ToolRuntime[BaseContext], path: str) -> tuple[Path, Path, str] | None:
    """For a path under ``skills/<slug>/``: the skill's resolved directory, the resolved
    target inside it and the prefix paths are shown with. None for ``skills`` itself."""
    found = _skill_path(runtime, path)
    assert found is not None
    slug, inner = found
    if not slug:
        return None
    roots: dict[str, str] = runtime.context.resolved.skill_roots
    if slug not in roots:
        raise ToolException(f"no skill named {slug} (skills: {', '.join(sorted(roots))})")
    root = Path(roots[slug]).resolve()
    target = _resolve(root, inner)
    return root, target, f"{SKILLS_ROOT}/{slug}/"


def _list_skills(runtime: ToolRuntime[BaseContext]) -> str:
    roots: dict[str, str] = runtime.context.resolved.skill_roots
    return "\n".join(f"{SKILLS_ROOT}/{slug}/" for slug in sorted(roots))


@tool(parse_docstring=True)
def list_files(runtime: ToolRuntime[BaseContext], path: str = ".") -> str:
    """List a directory of the conversation's working directory, one entry per line.

    Entries are paths relative to the working directory, sorted; directories end with "/".

    Args:
        path: Directory relative to the working directory. Default: the working directory.
    """
    prefix = ""
    if _skill_path(runtime, path) is not None:
        located = _locate(runtime, path)
        if located is None:
            return _list_skills(runtime)
        root, target, prefix = located
    else:
        root = _workdir(runtime)
        target = _resolve(root, path)
    if not target.exists():
        raise ToolException(f"no such directory: {path}")
    if not target.is_dir():
        raise ToolException(f"{path} is a file, not a directory; use read_file")
    try:
        children = sorted(target.iterdir(), key=lambda p: p.name)
    except OSError as exc:
        raise ToolException(f"cannot list {path}: {exc.strerror}") from None
    if not children:
        return f"(directory {_display(root, target, prefix)} is empty)"
    lines = []
    base = target.relative_to(root)
    for child in children[:MAX_LIST_ENTRIES]:
        name = prefix + (base / child.name).as_posix()
        lines.append(f"{name}/" if child.is_dir() else name)
    if len(children) > MAX_LIST_ENTRIES:
        lines.append(f"... and {len(children) - MAX_LIST_ENTRIES} more entries")
    return "\n".join(lines)


def _decode_text(data: bytes, *, truncated: bool) -> str | None:
    """UTF-8 text of ``data``, or None if it is not text. A truncated tail may end
    inside a multi-byte character; that partial character is dropped."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if truncated and exc.start >= len(data) - 3:
            try:
                return data[: exc.start].decode("utf-8")
            except UnicodeDecodeError:
                return None
        return None


@tool(parse_docstring=True)
def read_file(runtime: ToolRuntime[BaseContext], path: str) -> str:
    """Read a UTF-8 text file of the conversation's working directory.

    Returns at most the first 256 KiB and says so when the file is longer.

    Args:
        path: File path relative to the working directory.
    """
    if _skill_path(runtime, path) is not None:
        located = _locate(runtime, path)
        if located is None:
            raise ToolException(f"{path} is a directory, not a file; use list_files")
        _root, target, _prefix = located
    else:
        target = _resolve(_workdir(runtime), path)
    if not target.exists():
        raise ToolException(f"no such file: {path}")
    if target.is_dir():
        raise ToolException(f"{path} is a directory, not a file; use list_files")
    if not target.is_file():
        raise ToolException(f"{path} is not a regular file")
    try:
        with target.open("rb") as handle:
            size = target.stat().st_size
            data = handle.read(MAX_READ_BYTES + 1)
    except OSError as exc:
        raise ToolException(f"cannot read {path}: {exc.strerror}") from None
    truncated = len(data) > MAX_READ_BYTES
    if truncated:
        data = data[:MAX_READ_BYTES]
    text = _decode_text(data, truncated=truncated)
    if text is None:
        raise ToolException(f"{path} is not a UTF-8 text file")
    if truncated:
        text += (
            f"\n\n[truncated: showing the first {MAX_READ_BYTES} bytes"
            f" of {max(size, MAX_READ_BYTES + 1)} bytes]"
        )
    return text


def _write(runtime: ToolRuntime[BaseContext], path: str, content: str) -> tuple[str, str]:
    """Writes the file locally; what the tool says, and its path in the workdir."""
    if _skill_path(runtime, path) is not None:
        raise ToolException(
            f"{path} is under skills/, which is read-only: skill files cannot be written or"
            " changed; write elsewhere in the working directory"
        )
    root = _workdir(runtime, create=True)
    target = _resolve(root, path)
    if target == root or target.is_dir():
        raise ToolException(f"{path} is a directory, not a file")
    data = content.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        raise ToolException(f"content is too large ({len(data)} bytes; limit {MAX_WRITE_BYTES})")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    except OSError as exc:
        raise ToolException(f"cannot write {path}: {exc.strerror}") from None
    shown = _display(root, target)
    return f"wrote {len(data)} bytes to {shown}", target.relative_to(root).as_posix()


def _write_file(runtime: ToolRuntime[BaseContext], path: str, content: str) -> str:
    """Write a UTF-8 text file in the conversation's working directory.

    Replaces the file if it exists; creates missing parent directories.

    Args:
        path: File path relative to the working directory.
        content: The complete new content of the file.
    """
    return _write(runtime, path, content)[0]


async def _write_file_through(runtime: ToolRuntime[BaseContext], path: str, content: str) -> str:
    # in a worker's run the file is in the store (every host sees it) before this returns;
    # a call an earlier attempt of the run applied is not applied again
    run = services()
    key = runtime.tool_call_id
    if run.calls is not None and key and (done := await run.calls.applied(key)) is not None:
        return done
    said, written = await asyncio.to_thread(_write, runtime, path, content)
    if run.files is not None:
        await run.files.wrote(written)
    if run.calls is not None and key:
        await run.calls.record(key, "write_file", said)
    return said


write_file = StructuredTool.from_function(
    func=_write_file,
    coroutine=_write_file_through,
    name="write_file",
    parse_docstring=True,
)
