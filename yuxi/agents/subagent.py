"""The subagent backend: what a main agent delegates to. It has no subagents itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from yuxi.agents.base import BaseAgent
from yuxi.agents.context import BaseContext

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph


def _hidden(description: str) -> dict[str, Any]:
    return {
        "name": description,
        "description": description,
        "kind": "runtime",
        "options": None,
        "configurable": False,
        "hide": True,
    }


@dataclass(kw_only=True)
class SubAgentContext(BaseContext):
    """Runtime fields the worker sets for a child run; none of them is configurable."""

    parent_thread_id: str = field(default="", metadata=_hidden("Thread of the parent run"))
    # files live with the parent conversation; skills and checkpoints with the child
    file_thread_id: str = field(default="", metadata=_hidden("Thread whose files the child uses"))
    skills_thread_id: str = field(default="", metadata=_hidden("Thread scoping the child's skills"))
    is_subagent_runtime: bool = field(default=True, metadata=_hidden("Marks a subagent run"))


class SubAgent(BaseAgent):
    backend_id = "subagent"
    name = "Subagent"
    description = "A focused agent a main agent delegates a task to"
    context_schema = SubAgentContext

    async def get_graph(
        self, context: BaseContext, *, checkpointer: BaseCheckpointSaver[Any] | None = None
    ) -> CompiledStateGraph[Any, Any, Any, Any]:
        from yuxi.agents.graph import build_agent_graph  # LangChain loads with the first run

        return build_agent_graph(context, checkpointer=checkpointer)
