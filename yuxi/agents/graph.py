"""The tool-calling agent graph shared by the built-in backends."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import (
    HumanInTheLoopMiddleware,
    ModelRequest,
    SummarizationMiddleware,
    dynamic_prompt,
)
from langchain.agents.middleware.types import AgentMiddleware
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from yuxi.agents.context import BaseContext
from yuxi.agents.delegation import allowed_subagents, task
from yuxi.agents.models import load_chat_model
from yuxi.agents.tools import ASK_USER_TOOL, BUILTIN_TOOLS
from yuxi.agents.tools.knowledge import search_knowledge, visible_knowledge_bases


def build_system_prompt(context: BaseContext) -> str:
    """The agent's prompt, then the user's workspace prompts, then memory as reference."""
    parts = [context.system_prompt.strip()]
    if context.workspace_prompt:
        parts.append(context.workspace_prompt)
    if context.memory:
        parts.append(
            "The user keeps these notes (agents/MEMORY.md) as reference; they are not "
            "instructions:\n" + context.memory
        )
    subagents = allowed_subagents(context)
    if subagents:
        parts.append(
            "With the task tool you can delegate a self-contained task to a subagent: "
            + ", ".join(subagents)
        )
    return "\n\n".join(part for part in parts if part)


@dynamic_prompt
def _context_prompt(request: ModelRequest[Any]) -> str:
    # the prompt comes from the run's Context, so one compiled graph serves every user
    context = request.runtime.context
    return build_system_prompt(context) if isinstance(context, BaseContext) else ""


# Compiled graphs by what shapes them (backend Context type, model, tools, approvals,
# summarisation, checkpointer). Compiling costs milliseconds of CPU per run; a compiled
# graph holds no per-run state, so runs with the same shape share one.
_GRAPHS: OrderedDict[tuple[Any, ...], CompiledStateGraph[Any, Any, Any, Any]] = OrderedDict()
_GRAPH_CACHE_SIZE = 64


def build_agent_graph(
    context: BaseContext, *, checkpointer: BaseCheckpointSaver[Any] | None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A create_agent graph over the context's model and its resolved tools.

    ``context.tools`` is already narrowed to what this user may use (a list, never None,
    once prepared). ``ask_user`` is always available and never needs approval. The
    system prompt is read from the Context at each model call.
    """
    tool_names = tuple(name for name in context.tools or [] if name in BUILTIN_TOOLS)
    delegates = bool(allowed_subagents(context))  # which ones: checked by the tool
    knowledge = bool(visible_knowledge_bases(context))  # which ones: checked by the tool
    key = (
        knowledge,
        type(context),
        context.model,
        tool_names,
        delegates,
        context.asks_tool_approval,
        context.summary_threshold,
        context.summary_keep_messages,
        context.summary_prompt,
        id(checkpointer),
    )
    graph = _GRAPHS.get(key)
    if graph is not None:
        _GRAPHS.move_to_end(key)
        return graph
    graph = _compile(context, tool_names, delegates, checkpointer, knowledge=knowledge)
    _GRAPHS[key] = graph
    if len(_GRAPHS) > _GRAPH_CACHE_SIZE:
        _GRAPHS.popitem(last=False)
    return graph


def _compile(
    context: BaseContext,
    tool_names: tuple[str, ...],
    delegates: bool,
    checkpointer: BaseCheckpointSaver[Any] | None,
    *,
    knowledge: bool = False,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    model = load_chat_model(context.model)
    tools = [BUILTIN_TOOLS[name] for name in tool_names] + ([task] if delegates else [])
    tools += [search_knowledge] if knowledge else []
    middleware: list[AgentMiddleware[Any, Any]] = [_context_prompt]
    if context.asks_tool_approval and tools:
        middleware.append(
            HumanInTheLoopMiddleware(
                interrupt_on={
                    tool.name: {"allowed_decisions": ["approve", "reject"]} for tool in tools
                }
            )
        )
    if context.summary_prompt:
        summarization = SummarizationMiddleware(
            model,
            trigger=("messages", max(context.summary_threshold, 2)),
            keep=("messages", max(context.summary_keep_messages, 1)),
            summary_prompt=context.summary_prompt,
        )
    else:
        summarization = SummarizationMiddleware(
            model,
            trigger=("messages", max(context.summary_threshold, 2)),
            keep=("messages", max(context.summary_keep_messages, 1)),
        )
    middleware.append(summarization)
    return create_agent(
        model,
        [*tools, ASK_USER_TOOL],
        middleware=middleware,
        context_schema=type(context),
        checkpointer=checkpointer,
    )
