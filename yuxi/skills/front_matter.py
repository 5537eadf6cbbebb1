"""Loading the YAML front matter of a ``SKILL.md`` within limits: any user may upload a
skill, so the YAML is hostile input. PyYAML composes nodes recursively (a few thousand
nested ``[`` end in RecursionError) and expands aliases without bound when the result is
walked (a "billion laughs" of nested aliases, or an alias inside its own anchor that
never ends); its constructors raise ``ValueError`` for a 13th month or an integer of
5,000 digits. Here each of those is a ``FrontMatterError`` saying what to fix: the text
is bounded first, the nesting and the number of nodes (every alias counted as the nodes
it stands for) while it is composed, before anything is built from it.
"""

from __future__ import annotations

from typing import Any

import yaml  # type: ignore[import-untyped]

MAX_FRONT_MATTER_BYTES = 64 * 1024
MAX_DEPTH = 32
"""Levels of nesting: the top mapping is level 1, its keys and values level 2."""
MAX_NODES = 10_000
"""Keys, values and items, an alias counting as everything its anchor holds."""


class FrontMatterError(ValueError):
    """Front matter that is not YAML yuxi reads: the message says what to fix."""


def load_front_matter(text: str) -> Any:
    """The YAML document ``text`` as Python values (PyYAML's safe types)."""
    if len(text.encode()) > MAX_FRONT_MATTER_BYTES:
        raise FrontMatterError(
            f"the front matter of SKILL.md is at most {MAX_FRONT_MATTER_BYTES} bytes"
        )
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)  # its reader refuses control characters at once
        return loader.get_single_data()
    except FrontMatterError:
        raise
    except yaml.YAMLError as error:
        raise FrontMatterError(f"the front matter of SKILL.md is not valid YAML: {error}") from None
    except Exception as error:
        # a constructor's, on a value its tag cannot take (measured: ValueError for a
        # 13th month or 5,000 digits, IndexError for "!!int" of nothing, AttributeError
        # for a "!!timestamp" that is not one): the text is at fault, whatever it raised
        raise FrontMatterError(
            f"the front matter of SKILL.md has a bad value: {type(error).__name__}: {error}"
        ) from None
    finally:
        if loader is not None:
            loader.dispose()


class _BoundedLoader(yaml.SafeLoader):  # type: ignore[misc]
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0
        self._nodes = 0
        self._sizes: dict[str, int] = {}  # anchor -> the nodes it holds, once composed

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            size = self._sizes.get(event.anchor)
            if size is None and event.anchor in self.anchors:
                raise FrontMatterError(
                    f"the front matter of SKILL.md uses the alias *{event.anchor} inside"
                    " its own anchor"
                )
            self._count(size or 0)  # an undefined alias: the composer says so
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise FrontMatterError(
                f"the front matter of SKILL.md nests deeper than {MAX_DEPTH} levels"
            )
        before = self._nodes
        self._count(1)
        node = super().compose_node(parent, index)
        self._depth -= 1
        if event.anchor is not None:
            self._sizes[event.anchor] = self._nodes - before
        return node

    def _count(self, nodes: int) -> None:
        self._nodes += nodes
        if self._nodes > MAX_NODES:
            raise FrontMatterError(
                f"the front matter of SKILL.md holds more than {MAX_NODES} values"
                " (aliases counted as what they repeat)"
            )
