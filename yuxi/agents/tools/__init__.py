"""Built-in LangChain tools, one module per tool family, and their catalogue.

Every tool reads the run's context through LangGraph's injected ``runtime:
ToolRuntime`` parameter (``runtime.context`` is the run's ``BaseContext``).

- ``calculator``: ``calculator``
- ``clock``: ``get_current_time``
- ``files``: ``list_files``, ``read_file``, ``write_file`` (confined to the workdir)
- ``ask_user``: ``ask_user`` (an interrupt; always available)
- ``catalog``: ``BUILTIN_TOOLS``, ``ASK_USER_TOOL``, ``builtin_tool_names``
"""

from __future__ import annotations

from yuxi.agents.tools.catalog import ASK_USER_TOOL, BUILTIN_TOOLS, builtin_tool_names
from yuxi.agents.tools.files import MAX_LIST_ENTRIES, MAX_READ_BYTES, MAX_WRITE_BYTES

__all__ = [
    "ASK_USER_TOOL",
    "BUILTIN_TOOLS",
    "MAX_LIST_ENTRIES",
    "MAX_READ_BYTES",
    "MAX_WRITE_BYTES",
    "builtin_tool_names",
]
