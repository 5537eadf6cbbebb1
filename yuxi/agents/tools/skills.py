"""``activate_skill``: the model reads a skill's instructions and mounts what it needs.

The prompt lists every skill of the run by name and description (the index); the
instructions themselves cost no tokens until the model activates the skill. Activating
returns the skill's ``SKILL.md`` instructions and its file list, and marks it active in
the run's state (``active_skills``): the built-in tools and MCP servers the skill brings
(``context.resolved.skill_mounts``) are shown to the model from then on, and refused before.
Skills marked for preloading are active from the start.
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentState, ModelRequest
from langchain.agents.middleware.types import AgentMiddleware, ModelResponse
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import ToolException, tool
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from yuxi.agents.context import BaseContext

ACTIVATE_SKILL = "activate_skill"
MAX_BODY_BYTES = 64 * 1024
MAX_LISTED_FILES = 100
_FRONT = re.compile(r"\A---[ \t]*\r?\n.*?\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


def _union(current: list[str] | None, new: list[str] | None) -> list[str]:
    return list(dict.fromkeys([*(current or []), *(new or [])]))


class SkillsState(AgentState[Any]):
    """The skills the model has activated in this conversation (kept with its state)."""

    active_skills: NotRequired[Annotated[list[str], _union]]


def _roots(context: Any) -> dict[str, str]:
    return dict(context.resolved.skill_roots or {})


def _body(root: Path) -> str:
    try:
        with (root / "SKILL.md").open("rb") as handle:
            raw = handle.read(MAX_BODY_BYTES)
    except OSError as error:
        raise ToolException(f"cannot read the skill's SKILL.md: {error.strerror}") from None
    text = raw.decode("utf-8", "replace").lstrip("\ufeff")
    match = _FRONT.match(text)
    return (text[match.end() :] if match else text).strip()


def _files(root: Path, slug: str) -> list[str]:
    found: list[str] = []
    for directory, subdirs, names in os.walk(root):
        subdirs.sort()
        for name in sorted(names):
            path = Path(directory) / name
            if path.is_symlink():
                continue
            found.append(f"skills/{slug}/{path.relative_to(root).as_posix()}")
            if len(found) >= MAX_LISTED_FILES:
                return found
    return found


@tool(parse_docstring=True)
def activate_skill(runtime: ToolRuntime[BaseContext], name: str) -> Command[Any]:
    """Activate one of your skills: returns its instructions and the files it has.

    Call it before doing a task the skill covers; its files can then be read with
    read_file under skills/<name>/.

    Args:
        name: The skill's name, as the skill index lists it.
    """
    roots = _roots(runtime.context)
    if name not in roots:
        known = ", ".join(sorted(roots)) or "none"
        raise ToolException(f"no skill named {name!r} (skills: {known})")
    root = Path(roots[name])
    mounts = (runtime.context.resolved.skill_mounts or {}).get(name, {})
    parts = [f"Skill {name} is active. Its instructions:", _body(root)]
    files = _files(root, name)
    if files:
        parts.append("Its files (read-only):\n" + "\n".join(files))
    brought = [*mounts.get("tools", []), *(f"{m}__*" for m in mounts.get("mcps", []))]
    if brought:
        parts.append("Tools now available: " + ", ".join(brought))
    message = ToolMessage(
        "\n\n".join(parts), tool_call_id=runtime.tool_call_id, name=ACTIVATE_SKILL
    )
    return Command(update={"active_skills": [name], "messages": [message]})


activate_skill.handle_tool_error = True


def gated(context: Any, active: set[str]) -> Callable[[str], bool]:
    """Whether a tool name is hidden: brought by a skill that is not active, and by no
    active one."""
    mounts: dict[str, dict[str, list[str]]] = context.resolved.skill_mounts or {}
    hidden_tools: set[str] = set()
    hidden_mcps: set[str] = set()
    shown_tools: set[str] = set()
    shown_mcps: set[str] = set()
    for slug, brought in mounts.items():
        tools, mcps = (shown_tools, shown_mcps) if slug in active else (hidden_tools, hidden_mcps)
        tools.update(brought.get("tools", []))
        mcps.update(brought.get("mcps", []))
    hidden_tools -= shown_tools
    hidden_mcps -= shown_mcps

    def hidden(name: str) -> bool:
        if name in hidden_tools:
            return True
        server, sep, _tool = name.partition("__")
        return bool(sep) and server in hidden_mcps

    return hidden


def _active(state: Any, context: Any) -> set[str]:
    listed = state.get("active_skills") if isinstance(state, dict) else None
    return set(listed or []) | set(context.resolved.preloaded_skills or [])


class SkillsMiddleware(AgentMiddleware[SkillsState, Any]):
    """Mounts ``activate_skill`` and hides (and refuses) the tools of inactive skills."""

    state_schema = SkillsState

    def __init__(self) -> None:
        super().__init__()
        self.tools = [activate_skill]

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        context = request.runtime.context
        hidden = gated(context, _active(request.state, context))
        tools = [t for t in request.tools if not hidden(str(getattr(t, "name", "")))]
        return await handler(request.override(tools=tools))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        context = request.runtime.context
        name = str(request.tool_call.get("name", ""))
        if gated(context, _active(request.state, context))(name):
            return ToolMessage(
                f"tool {name} belongs to a skill that is not active; call activate_skill first",
                tool_call_id=str(request.tool_call.get("id", "")),
                name=name,
                status="error",
            )
        return await handler(request)
