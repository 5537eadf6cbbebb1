"""The general chat agent: every configurable field of BaseContext plus subagents."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from yuxi.agents.base import BaseAgent
from yuxi.agents.context import BaseContext

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph


@dataclass(kw_only=True)
class ChatBotContext(BaseContext):
    """``subagents``: unset or empty = every subagent the user can see; a list narrows."""

    subagents: list[str] | None = field(
        default=None,
        metadata={
            "name": "Subagents",
            "description": "Subagents this agent may delegate to",
            "kind": "agents",
            "options": None,
            "configurable": True,
            "hide": False,
        },
    )


class ChatBotAgent(BaseAgent):
    backend_id = "chatbot"
    name = "Chatbot"
    description = "A general assistant with tools and subagents"
    context_schema = ChatBotContext
    capabilities = ("files",)

    async def get_graph(
        self, context: BaseContext, *, checkpointer: BaseCheckpointSaver[Any] | None = None
    ) -> CompiledStateGraph[Any, Any, Any, Any]:
        from yuxi.agents.graph import build_agent_graph  # LangChain loads with the first run

        return build_agent_graph(context, checkpointer=checkpointer)
