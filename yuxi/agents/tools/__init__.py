"""Built-in LangChain tools, one module per tool family, and their catalogue.

Every tool reads the run's context through LangGraph's injected ``runtime:
ToolRuntime`` parameter (``runtime.context`` is the run's ``BaseContext``).

- ``calculator``: ``calculator``
- ``clock``: ``get_current_time``
- ``files``: ``list_files``, ``read_file``, ``write_file`` (confined to the workdir)
- ``ask_user``: ``ask_user`` (an interrupt; always available)
- ``catalog``: ``BUILTIN_TOOLS``, ``ASK_USER_TOOL``
- ``names``: ``builtin_tool_names`` (no LangChain needed, for the API and the catalog)

The tools load LangChain; they are imported on first use of a name below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yuxi.agents.tools.names import builtin_tool_names

if TYPE_CHECKING:
    from yuxi.agents.tools.catalog import ASK_USER_TOOL, BUILTIN_TOOLS
    from yuxi.agents.tools.files import MAX_LIST_ENTRIES, MAX_READ_BYTES, MAX_WRITE_BYTES

__all__ = [
    "ASK_USER_TOOL",
    "BUILTIN_TOOLS",
    "MAX_LIST_ENTRIES",
    "MAX_READ_BYTES",
    "MAX_WRITE_BYTES",
    "builtin_tool_names",
]

_LAZY = {
    "ASK_USER_TOOL": "yuxi.agents.tools.catalog",
    "BUILTIN_TOOLS": "yuxi.agents.tools.catalog",
    "MAX_LIST_ENTRIES": "yuxi.agents.tools.files",
    "MAX_READ_BYTES": "yuxi.agents.tools.files",
    "MAX_WRITE_BYTES": "yuxi.agents.tools.files",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
