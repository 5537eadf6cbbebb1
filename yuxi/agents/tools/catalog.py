"""The built-in tool catalogue: the user-selectable tools by name, and ``ask_user``.

A tool failure raises ``ToolException``; every built-in sets ``handle_tool_error`` so
the model receives the error text as the tool result instead of the run failing.
"""

from __future__ import annotations

from langchain_core.tools import BaseTool

from yuxi.agents.tools.ask_user import ask_user
from yuxi.agents.tools.calculator import calculator
from yuxi.agents.tools.clock import get_current_time
from yuxi.agents.tools.files import list_files, read_file, write_file
from yuxi.agents.tools.names import builtin_tool_names

__all__ = ["ASK_USER_TOOL", "BUILTIN_TOOLS", "builtin_tool_names"]

for _tool in (calculator, get_current_time, list_files, read_file, write_file, ask_user):
    _tool.handle_tool_error = True

BUILTIN_TOOLS: dict[str, BaseTool] = {
    t.name: t for t in (calculator, get_current_time, list_files, read_file, write_file)
}
"""The user-selectable built-in tools, by name, in catalogue order."""

ASK_USER_TOOL: BaseTool = ask_user
"""Always available to agents; never subject to tool approval."""
