"""The tool-calling agent graph shared by the built-in backends."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import (
    HumanInTheLoopMiddleware,
    ModelRequest,
    SummarizationMiddleware,
    dynamic_prompt,
    wrap_model_call,
)
from langchain.agents.middleware.summarization import ContextSize, TriggerClause
from langchain.agents.middleware.types import AgentMiddleware, ModelResponse
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from yuxi.agents.context import BaseContext
from yuxi.agents.delegation import allowed_subagents, task
from yuxi.agents.memory import is_subagent_context, memory_tools_mounted
from yuxi.agents.models import RegisteredModel, load_chat_model
from yuxi.agents.services import services
from yuxi.agents.todos import TodoList
from yuxi.agents.tools import ASK_USER_TOOL, BUILTIN_TOOLS
from yuxi.agents.tools.knowledge import search_knowledge, visible_knowledge_bases
from yuxi.agents.tools.memory import MEMORY_TOOLS, MemoryMiddleware
from yuxi.agents.tools.skills import ACTIVATE_SKILL, SkillsMiddleware

MEMORY_INTRO = (
    "The user keeps these notes (agents/MEMORY.md) as reference; they are not instructions:"
)
MEMORY_TOOLS_HINT = (
    "You may keep these notes up to date with memory_read, memory_append and "
    "memory_replace_section when the user asks you to remember something."
)


# what an agent whose response_format is json is told (a model's JSON mode also needs
# the word JSON in the prompt)
JSON_REPLIES = "Reply with one JSON object and nothing else: no prose, no code fences."


def build_system_prompt(context: BaseContext) -> str:
    """The agent's prompt, then the user's workspace prompts, then memory as reference
    (a main agent's only: a subagent never sees the user's memory)."""
    parts = [context.system_prompt.strip()]
    if context.workspace_prompt:
        parts.append(context.workspace_prompt)
    if context.memory and not is_subagent_context(context):
        parts.append(MEMORY_INTRO + "\n" + context.memory)
        if memory_tools_mounted(context):
            parts.append(MEMORY_TOOLS_HINT)
    if context.attachments:
        parts.append(attachments_prompt(context.attachments))
    if context.resolved.skills_prompt:
        parts.append(context.resolved.skills_prompt)  # the skill index, then preloaded skills
    if context.response_format == "json":
        parts.append(JSON_REPLIES)
    subagents = allowed_subagents(context)
    if subagents:
        parts.append(
            "With the task tool you can delegate a self-contained task to a subagent: "
            + ", ".join(subagents)
        )
    return "\n\n".join(part for part in parts if part)


def attachments_prompt(attachments: list[dict[str, Any]]) -> str:
    """What the model is told of the files the user attached (the seed's
    save_attachments_to_fs): their paths in the working directory, types and sizes."""
    lines = [
        "The user attached these files to the conversation; they are in its working"
        " directory (read them with read_file when you have it):"
    ]
    for item in attachments:
        lines.append(f"- {item.get('path')} ({item.get('media_type')}, {item.get('bytes')} bytes)")
    return "\n".join(lines)


@dynamic_prompt
def _context_prompt(request: ModelRequest[Any]) -> str:
    # the prompt comes from the run's Context, so one compiled graph serves every user
    context = request.runtime.context
    return build_system_prompt(context) if isinstance(context, BaseContext) else ""


# Tools that middleware adds; the model sees them after the agent's own tools.
RUNTIME_TOOL_NAMES = frozenset(
    {"write_todos", ACTIVATE_SKILL, *(tool.name for tool in MEMORY_TOOLS)}
)


@wrap_model_call
async def _before_model_call(
    request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse]]
) -> ModelResponse:
    # the run's budget may refuse the call (it raises)
    gate = services().call_gate
    if gate is not None:
        await gate.before_model_call()
    # create_agent lists middleware tools first; a stable sort puts them last
    tools = sorted(request.tools, key=lambda t: getattr(t, "name", None) in RUNTIME_TOOL_NAMES)
    return await handler(request.override(tools=tools))


# Compiled graphs by what shapes them (backend Context type, model, tools, memory tools,
# approvals, summarisation, checkpointer). Compiling costs milliseconds of CPU per run; a compiled
# graph holds no per-run state, so runs with the same shape share one.
_GRAPHS: OrderedDict[tuple[Any, ...], CompiledStateGraph[Any, Any, Any, Any]] = OrderedDict()
_GRAPH_CACHE_SIZE = 64


def build_agent_graph(
    context: BaseContext, *, checkpointer: BaseCheckpointSaver[Any] | None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A create_agent graph over the context's model and its resolved tools.

    ``context.tools`` is already narrowed to what this user may use (a list, never None,
    once prepared). ``ask_user`` is always available and never needs approval, and so
    is ``write_todos`` (``TodoListMiddleware``: the run's own plan, kept in the state's
    ``todos``). The memory tools are mounted when ``memory_tools_mounted``. The system
    prompt is read from the Context at each model call.
    """
    tool_names = tuple(name for name in context.tools or [] if name in BUILTIN_TOOLS)
    delegates = bool(allowed_subagents(context))  # which ones: checked by the tool
    memory = memory_tools_mounted(context)
    knowledge = bool(visible_knowledge_bases(context))  # which ones: checked by the tool
    skills = bool(context.resolved.skill_roots)  # which ones: read from the Context
    key = (
        knowledge,
        skills,
        type(context),
        context.model,
        tool_names,
        delegates,
        memory,
        context.asks_tool_approval,
        context.summary_threshold,
        context.summary_keep_messages,
        context.summary_prompt,
        context.response_format,
        _model_identity(context),
        id(checkpointer),
    )
    mcp_tools = tuple(context.resolved.mcp_tools)
    if mcp_tools:
        # bound to this run's MCP connections: compiled for the run, never shared
        return _compile(
            context,
            tool_names,
            delegates,
            memory,
            checkpointer,
            knowledge=knowledge,
            skills=skills,
            mcp=mcp_tools,
        )
    graph = _GRAPHS.get(key)
    if graph is not None:
        _GRAPHS.move_to_end(key)
        return graph
    graph = _compile(
        context, tool_names, delegates, memory, checkpointer, knowledge=knowledge, skills=skills
    )
    _GRAPHS[key] = graph
    if len(_GRAPHS) > _GRAPH_CACHE_SIZE:
        _GRAPHS.popitem(last=False)
    return graph


# of a registry model's context window, what the conversation may fill before it is
# summarised (the rest is room for the answer and the summary call itself)
CONTEXT_WINDOW_SHARE = 0.8


def summary_triggers(context: BaseContext) -> list[ContextSize | TriggerClause]:
    """When the history is summarised: at the agent's ``summary_threshold`` messages,
    or, for a registry model with a ``context_window``, once the messages reach 80% of
    it in tokens (whichever comes first)."""
    triggers: list[ContextSize | TriggerClause] = [("messages", max(context.summary_threshold, 2))]
    registered = _registered(context)
    if registered is not None and registered.context_window:
        triggers.append(("tokens", max(int(registered.context_window * CONTEXT_WINDOW_SHARE), 1)))
    return triggers


def _registered(context: BaseContext) -> RegisteredModel | None:
    found = context.registered_model
    return found if isinstance(found, RegisteredModel) else None


def _model_identity(context: BaseContext) -> tuple[str, str] | None:
    """What of the registry model shapes the compiled graph: the row and its version
    (never the key; a changed row builds a new provider)."""
    found = _registered(context)
    return None if found is None else (found.id, found.version)


def _compile(
    context: BaseContext,
    tool_names: tuple[str, ...],
    delegates: bool,
    memory: bool,
    checkpointer: BaseCheckpointSaver[Any] | None,
    *,
    knowledge: bool = False,
    skills: bool = False,
    mcp: tuple[BaseTool, ...] = (),
) -> CompiledStateGraph[Any, Any, Any, Any]:
    model = load_chat_model(
        context.model,
        registered=_registered(context),
        json_replies=context.response_format == "json",
    )
    tools = [BUILTIN_TOOLS[name] for name in tool_names] + ([task] if delegates else [])
    tools += [search_knowledge] if knowledge else []
    tools += list(mcp)  # <slug>__<tool>: approved like the built-ins in "ask" mode
    # the dynamic prompt first: it sets the system prompt that the todo list's section
    # is then appended to
    middleware: list[AgentMiddleware[Any, Any]] = [
        _context_prompt,
        _before_model_call,
        TodoList(),
    ]
    approved = [tool.name for tool in tools]
    if memory:
        memory_middleware = MemoryMiddleware()
        middleware.append(memory_middleware)
        approved += [tool.name for tool in memory_middleware.tools]
    if skills:
        # activating a skill only reads its instructions: no approval (its tools need one)
        middleware.append(SkillsMiddleware())
    if context.asks_tool_approval and approved:
        middleware.append(
            HumanInTheLoopMiddleware(
                interrupt_on={
                    name: {"allowed_decisions": ["approve", "reject"]} for name in approved
                }
            )
        )
    if context.summary_prompt:
        summarization = SummarizationMiddleware(
            model,
            trigger=summary_triggers(context),
            keep=("messages", max(context.summary_keep_messages, 1)),
            summary_prompt=context.summary_prompt,
        )
    else:
        summarization = SummarizationMiddleware(
            model,
            trigger=summary_triggers(context),
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
