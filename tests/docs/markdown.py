"""Fenced code blocks of a Markdown file, with the marker comment that precedes each.

A marker is an HTML comment (invisible once rendered) directly above a fence, blank
lines allowed in between. Its first word names it, one of the names the caller asks
for; the rest is its body:

    <!-- walkthrough -->
    ```sh
    ...
    ```

A marker followed by anything but a fence is an error, so a marker cannot silently
drift away from the block it was written for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"^(?P<fence>```+)(?P<info>[^`]*)$")
_MARKER_START = re.compile(r"^<!--\s*(?P<name>[a-z][a-z0-9-]*)(?P<rest>.*)$")


@dataclass(frozen=True)
class Marker:
    name: str
    body: str
    line: int


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: its info string (``sql``, ``sh``, …), text, and where it is."""

    info: str
    text: str
    line: int
    heading: str
    marker: Marker | None


def read_blocks(path: Path, markers: frozenset[str]) -> list[CodeBlock]:
    """Every fenced block of ``path``, in order, with the comment named in ``markers``
    that precedes it; other comments are left alone."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[CodeBlock] = []
    heading = ""
    marker: Marker | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = _FENCE.match(line)
        started = _MARKER_START.match(line)
        if fence:
            end = _closing_fence(lines, index, fence.group("fence"), path)
            blocks.append(
                CodeBlock(
                    info=fence.group("info").strip(),
                    text="\n".join(lines[index + 1 : end]) + "\n",
                    line=index + 1,
                    heading=heading,
                    marker=marker,
                )
            )
            marker = None
            index = end + 1
            continue
        if marker is not None and line.strip():
            raise ValueError(
                f"{path}:{marker.line}: marker <!-- {marker.name} --> is not followed by a"
                " code block"
            )
        if started and started.group("name") in markers:
            marker, index = _read_marker(lines, index, started, path)
            continue
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        index += 1
    if marker is not None:
        raise ValueError(f"{path}:{marker.line}: marker <!-- {marker.name} --> ends the file")
    return blocks


def _closing_fence(lines: list[str], start: int, fence: str, path: Path) -> int:
    for end in range(start + 1, len(lines)):
        if lines[end].strip() == fence:
            return end
    raise ValueError(f"{path}:{start + 1}: unclosed code block")


def _read_marker(
    lines: list[str], start: int, started: re.Match[str], path: Path
) -> tuple[Marker, int]:
    """The marker opening at ``start`` and the index of the line after it."""
    body: list[str] = []
    rest = started.group("rest")
    index = start
    while "-->" not in rest:
        body.append(rest)
        index += 1
        if index == len(lines):
            raise ValueError(f"{path}:{start + 1}: unclosed comment")
        rest = lines[index]
    body.append(rest[: rest.index("-->")])
    text = "\n".join(part.strip() for part in body).strip()
    return Marker(started.group("name"), text, start + 1), index + 1


def slug(text: str) -> str:
    """A heading as a test id: ``Cancel a run`` -> ``cancel-a-run``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "top"
