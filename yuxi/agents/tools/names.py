"""The names of the user-selectable built-in tools, without building the tools: what the
API's configuration forms and the resource catalog need (LangChain stays unloaded).
``catalog.BUILTIN_TOOLS`` holds the tools themselves, in the same order (a test says so).
"""

from __future__ import annotations

BUILTIN_TOOL_NAMES: tuple[str, ...] = (
    "calculator",
    "get_current_time",
    "list_files",
    "read_file",
    "write_file",
)


def builtin_tool_names() -> list[str]:
    """Names of the user-selectable built-in tools, in catalogue order."""
    return list(BUILTIN_TOOL_NAMES)
