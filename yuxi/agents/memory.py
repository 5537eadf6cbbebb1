"""Memory: the user's ``agents/MEMORY.md``, offered to a main agent as reference and,
through limited tools, kept up to date by it.

The tools (``yuxi.agents.tools.memory``) are mounted only when ``memory_tools_mounted``
holds: the run's Context has ``enable_memory``, the file had text when the run was
prepared, and the run is not a subagent's. Every call works through the run's
``RunMemory``, which the worker lends the run (``yuxi.agents.services``) around the
graph it streams: it knows the run's user, run id and lease, checks
the lease in the database and reads and writes the file. Without one (a graph run
outside a worker) the tools refuse.

This module needs no LangChain: it holds the text edits the tools make and the seam to
the worker.
"""

from __future__ import annotations

import re


class MemoryRefused(Exception):
    """A memory call that cannot go ahead; the message says why, for the model."""


def is_subagent_context(context: object) -> bool:
    """Whether ``context`` is a subagent's run (a child run, or a run of a subagent
    agent): the one way agents ask it. The worker answers it once, when it prepares
    the Context (``is_subagent_runtime``)."""
    return bool(getattr(context, "is_subagent_runtime", False))


def memory_tools_mounted(context: object) -> bool:
    """Whether a run gets the memory tools: ``enable_memory``, memory text read when the
    run was prepared (the file exists and is not empty), and a main agent's run."""
    return (
        bool(getattr(context, "enable_memory", False))
        and bool(getattr(context, "memory", ""))
        and not is_subagent_context(context)
    )


# -- the edits ----------------------------------------------------------------------------

_HEADING = re.compile(r"(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*")
_FENCE = re.compile(r"[ ]{0,3}(`{3,}|~{3,})")


def append_text(current: str, text: str) -> str:
    """``current`` with ``text`` added as a paragraph of its own at the end."""
    addition = text.strip("\n")
    if not addition.strip():
        raise MemoryRefused("nothing to append: the text is empty")
    kept = current.rstrip("\n")
    return f"{kept}\n\n{addition}\n" if kept else f"{addition}\n"


def replace_section(current: str, heading: str, content: str) -> str:
    """``current`` with the body of its Markdown section ``heading`` replaced by
    ``content``: from the line after the heading up to the next heading of the same or a
    higher level (outside code fences). ``heading`` is the heading's text (a ``##``
    section) or a whole heading line (``### Notes``). A missing section is appended."""
    level, title = _parse_heading(heading)
    lines = current.splitlines(keepends=True)
    body = content.strip("\n")
    start = _find_heading(lines, level, title)
    if start is None:
        addition = f"{'#' * level} {title}\n\n{body}\n" if body else f"{'#' * level} {title}\n"
        kept = current.rstrip("\n")
        return f"{kept}\n\n{addition}" if kept else addition
    end = _section_end(lines, start, level)
    head = "".join(lines[: start + 1])
    if not head.endswith("\n"):
        head += "\n"
    tail = "".join(lines[end:])
    middle = f"\n{body}\n" if body else ""
    return head + middle + ("\n" + tail if tail else "")


def _parse_heading(heading: str) -> tuple[int, str]:
    text = heading.strip()
    match = _HEADING.fullmatch(text)
    level, title = (len(match.group(1)), match.group(2).strip()) if match else (2, text)
    if not title.strip("#") or "\n" in title:
        raise MemoryRefused("a heading is one non-empty line, e.g. 'Preferences'")
    return level, title


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line index, level, title) of every ATX heading outside code fences."""
    found = []
    fence: str | None = None
    for index, line in enumerate(lines):
        stripped = line.rstrip("\r\n")
        marker = _FENCE.match(stripped)
        if marker:
            token = marker.group(1)
            if fence is None:
                fence = token[0] * 3
            elif token.startswith(fence):
                fence = None
            continue
        if fence is not None:
            continue
        match = _HEADING.fullmatch(stripped)
        if match:
            found.append((index, len(match.group(1)), match.group(2).strip()))
    return found


def _find_heading(lines: list[str], level: int, title: str) -> int | None:
    for index, found_level, found_title in _headings(lines):
        if found_level == level and found_title == title:
            return index
    return None


def _section_end(lines: list[str], start: int, level: int) -> int:
    for index, found_level, _title in _headings(lines):
        if index > start and found_level <= level:
            return index
    return len(lines)
