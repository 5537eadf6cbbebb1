"""The ``task`` tool: a main agent delegates a self-contained task to one of its subagents.

The tool is mounted on an agent whose prepared ``subagents`` list is not empty. A call
starts a child run of the named subagent (``yuxi.run_create_subagent``: run_type
``subagent``, created by the calling run, its own checkpoint thread, the conversation's
files) and waits for it; the child's final answer is the tool's result. How the child
is executed is the worker's business: it lends the run a ``delegate``
(``yuxi.agents.services``) around the graph it streams, and the tool calls it. Without
one (a graph run outside a worker) the tool says so instead of starting anything.
"""

from __future__ import annotations

from langchain.tools import ToolRuntime
from langchain_core.tools import tool

from yuxi.agents.context import BaseContext
from yuxi.agents.services import services


def allowed_subagents(context: object) -> list[str]:
    """The subagents this run may delegate to (the prepared, narrowed list)."""
    return list(getattr(context, "subagents", None) or [])


@tool(parse_docstring=True)
async def task(runtime: ToolRuntime[BaseContext], subagent: str, description: str) -> str:
    """Delegate a self-contained task to a subagent and return its answer.

    Args:
        subagent: The subagent to run, one of those named in your instructions.
        description: Everything the subagent needs: it sees no other message.
    """
    allowed = allowed_subagents(runtime.context)
    if subagent not in allowed:
        return f"subagent {subagent} is not available (available: {', '.join(allowed) or 'none'})"
    delegate = services().delegate
    if delegate is None:
        return "subagents cannot run outside a yuxi worker"
    return await delegate.run_subagent(subagent, description)
