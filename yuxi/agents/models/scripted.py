"""``builtin:scripted``: a deterministic, offline chat model for demos and tests.

It reads the latest human message and what came after it (CONTRACT.md, "The built-in
test model"):

==========================  ====================================================
``/sleep N``                waits N seconds (cancellable), replies ``slept N``
``/fail TEXT``              raises ScriptedModelError(TEXT)
``/tool NAME {json}``       calls tool NAME with the JSON object as arguments;
                            after the tool answers: ``tool NAME returned: <result>``
                            (``tool NAME failed: <result>`` for an error result)
``/ask QUESTION``           calls ``ask_user`` with ``{"question": QUESTION}``;
                            after the answer X: ``you answered: X``
``/todo ITEM; ITEM; ...``   calls ``write_todos`` with one todo per item (``[x] ``
                            first: completed, ``[~] ``: in_progress, else
                            pending); then replies like ``/tool``
anything else               ``echo: <message>``
==========================  ====================================================

Streaming yields text word by word and a tool call as one tool-call chunk; the
aggregated stream equals the non-streaming reply.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from yuxi.agents.models.usage import StreamsInRuns

ASK_USER_TOOL_NAME = "ask_user"
"""The tool ``/ask`` calls; the runtime provides it (it interrupts for the answer)."""

WRITE_TODOS_TOOL_NAME = "write_todos"
"""The tool ``/todo`` calls (LangChain's ``TodoListMiddleware``)."""

# an item's prefix and the status it gives; no prefix: pending
_TODO_STATUS = {"[x]": "completed", "[~]": "in_progress"}


class ScriptedModelError(RuntimeError):
    """Raised by ``/fail TEXT``; ``str(error)`` is TEXT."""


@dataclass(frozen=True)
class _Plan:
    """What one model call does: optionally sleep, then fail, reply text or call a tool."""

    text: str = ""
    tool_call: ToolCall | None = None
    sleep: float = 0.0
    error: str | None = None


_DIRECTIVE = re.compile(r"/(sleep|fail|tool|ask|todo)(?:\s+(.*))?", re.DOTALL)
_TOOL_ARGS = re.compile(r"(\S+)\s*(.*)", re.DOTALL)
# A word and the whitespace after it: chunks concatenate back to the exact text.
_WORD = re.compile(r"\s*\S+\s*|\s+")


class ScriptedChatModel(StreamsInRuns, BaseChatModel):
    """The deterministic test model behind ``builtin:scripted``."""

    tool_names: tuple[str, ...] | None = None
    """Names of the bound tools; ``None`` until ``bind_tools`` is called (every tool
    name is then accepted)."""

    tool_calling: bool = True
    """When false (capability ``tool_calling``), ``bind_tools`` binds nothing, so
    every ``/tool`` and ``/ask`` answers that the tool is not available."""

    @property
    def _llm_type(self) -> str:
        return "builtin-scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": "scripted", "tool_names": self.tool_names}

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Returns a copy that knows which tools exist; ``tool_choice`` and other
        provider options are accepted and ignored."""
        names = tuple(n for n in map(_tool_name, tools) if n) if self.tool_calling else ()
        return self.model_copy(update={"tool_names": names})

    # -- the four entry points share _plan ------------------------------------------

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        plan = self._plan(messages)
        if plan.sleep:
            time.sleep(plan.sleep)
        return ChatResult(generations=[ChatGeneration(message=_message(plan, messages))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        plan = self._plan(messages)
        if plan.sleep:
            # Native async so a cancelled run stops here at once (the default
            # _agenerate would block an executor thread in time.sleep).
            await asyncio.sleep(plan.sleep)
        return ChatResult(generations=[ChatGeneration(message=_message(plan, messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        plan = self._plan(messages)
        if plan.sleep:
            time.sleep(plan.sleep)
        yield from _chunks(plan, messages)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        plan = self._plan(messages)
        if plan.sleep:
            await asyncio.sleep(plan.sleep)
        for chunk in _chunks(plan, messages):
            yield chunk

    # -- the script ---------------------------------------------------------------

    def _plan(self, messages: Sequence[BaseMessage]) -> _Plan:
        """Decides the reply; raises ScriptedModelError for ``/fail``."""
        plan = self._decide(messages)
        if plan.error is not None:
            raise ScriptedModelError(plan.error)
        return plan

    def _decide(self, messages: Sequence[BaseMessage]) -> _Plan:
        start = _latest_human_index(messages)
        text = messages[start].text if start is not None else ""
        after = messages[start + 1 :] if start is not None else messages
        match = _DIRECTIVE.fullmatch(text.strip())
        directive = match.group(1) if match else None
        if after and isinstance(after[-1], ToolMessage):
            return _after_tool(directive, after[-1], after)
        if match is None:
            return _Plan(text=f"echo: {text}")
        argument = (match.group(2) or "").strip()
        if directive == "sleep":
            return _sleep(argument)
        if directive == "fail":
            return _Plan(error=argument or "scripted failure")
        if directive == "ask":
            if not argument:
                return _Plan(text="usage: /ask QUESTION")
            return self._call(ASK_USER_TOOL_NAME, {"question": argument}, messages)
        if directive == "todo":
            todos = _todos(argument)
            if not todos:
                return _Plan(text="usage: /todo ITEM; ITEM; ... ([x] done, [~] in progress)")
            return self._call(WRITE_TODOS_TOOL_NAME, {"todos": todos}, messages)
        return self._tool(argument, messages)

    def _tool(self, argument: str, messages: Sequence[BaseMessage]) -> _Plan:
        match = _TOOL_ARGS.fullmatch(argument)
        if match is None:
            return _Plan(text="usage: /tool NAME {json arguments}")
        name, raw_args = match.group(1), match.group(2).strip()
        try:
            args = json.loads(raw_args) if raw_args else {}
        except json.JSONDecodeError as exc:
            return _Plan(text=f"invalid JSON arguments for tool {name}: {exc}")
        if not isinstance(args, dict):
            return _Plan(text=f"invalid JSON arguments for tool {name}: expected an object")
        return self._call(name, args, messages)

    def _call(self, name: str, args: dict[str, Any], messages: Sequence[BaseMessage]) -> _Plan:
        if self.tool_names is not None and name not in self.tool_names:
            return _Plan(text=f"tool {name} is not available")
        # Numbered by the tool calls already in the conversation: deterministic for a
        # given history, distinct within one conversation.
        earlier = sum(len(m.tool_calls) for m in messages if isinstance(m, AIMessage))
        call = ToolCall(name=name, args=args, id=f"call_{earlier + 1}", type="tool_call")
        return _Plan(tool_call=call)


def _latest_human_index(messages: Sequence[BaseMessage]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return index
    return None


def _after_tool(directive: str | None, result: ToolMessage, after: Sequence[BaseMessage]) -> _Plan:
    """The reply once the tool call made for the latest human message has an answer."""
    name = result.name or ""
    for message in after:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call["id"] == result.tool_call_id:
                    name = call["name"]
    content = result.text
    if directive == "ask" and name == ASK_USER_TOOL_NAME:
        return _Plan(text=f"you answered: {content}")
    if result.status == "error":
        return _Plan(text=f"tool {name} failed: {content}")
    return _Plan(text=f"tool {name} returned: {content}")


def _todos(argument: str) -> list[dict[str, str]]:
    """``a; [x] b; [~] c`` as todos: content and status, empty items left out."""
    todos = []
    for raw in argument.split(";"):
        item = raw.strip()
        status = "pending"
        for prefix, marked in _TODO_STATUS.items():
            if item.startswith(prefix):
                item, status = item[len(prefix) :].strip(), marked
        if item:
            todos.append({"content": item, "status": status})
    return todos


def _sleep(argument: str) -> _Plan:
    try:
        seconds = float(argument)
    except ValueError:
        seconds = -1.0
    if not math.isfinite(seconds) or seconds < 0:
        return _Plan(text=f"usage: /sleep SECONDS (a non-negative number), got {argument!r}")
    # "slept N" repeats N as written: "/sleep 0.50" replies "slept 0.50".
    return _Plan(text=f"slept {argument}", sleep=seconds)


def usage_of(messages: Sequence[BaseMessage], plan: _Plan) -> UsageMetadata:
    """The scripted model's deterministic token count: one input token per word of
    every message it was sent, one output token per word of its reply (a tool call:
    its name and each word of its JSON arguments)."""
    input_tokens = sum(len(message.text.split()) for message in messages)
    if plan.tool_call is not None:
        output_tokens = 1 + len(json.dumps(plan.tool_call["args"]).split())
    else:
        output_tokens = len(plan.text.split())
    return UsageMetadata(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )


_METADATA = {"model_name": "scripted"}


def _message(plan: _Plan, messages: Sequence[BaseMessage]) -> AIMessage:
    usage = usage_of(messages, plan)
    if plan.tool_call is not None:
        return AIMessage(
            content="",
            tool_calls=[plan.tool_call],
            usage_metadata=usage,
            response_metadata=dict(_METADATA),
        )
    return AIMessage(content=plan.text, usage_metadata=usage, response_metadata=dict(_METADATA))


def _chunks(plan: _Plan, messages: Sequence[BaseMessage]) -> Iterator[ChatGenerationChunk]:
    usage = usage_of(messages, plan)
    if plan.tool_call is not None:
        call = plan.tool_call
        chunk = AIMessageChunk(
            content="",
            tool_call_chunks=[
                {
                    "name": call["name"],
                    "args": json.dumps(call["args"]),
                    "id": call["id"],
                    "index": 0,
                    "type": "tool_call_chunk",
                }
            ],
            chunk_position="last",
            usage_metadata=usage,
            response_metadata=dict(_METADATA),
        )
        yield ChatGenerationChunk(message=chunk)
        return
    words = _WORD.findall(plan.text) or [""]
    for position, word in enumerate(words):
        last = position == len(words) - 1
        message = AIMessageChunk(
            content=word,
            chunk_position="last" if last else None,
            # the usage and model name once, on the last chunk (chunks add up)
            usage_metadata=usage if last else None,
            response_metadata=dict(_METADATA) if last else {},
        )
        yield ChatGenerationChunk(message=message)


def _tool_name(tool: dict[str, Any] | type | Callable[..., Any] | BaseTool) -> str | None:
    """The name a bound tool is called by; ``None`` for provider built-ins without one."""
    if isinstance(tool, BaseTool):
        return tool.name
    if isinstance(tool, dict):
        function = tool.get("function")
        found: object = function.get("name") if isinstance(function, dict) else tool.get("name")
        return found if isinstance(found, str) else None
    try:
        converted = convert_to_openai_tool(tool)
    except (TypeError, ValueError):
        return None
    found = converted.get("function", {}).get("name")
    return found if isinstance(found, str) else None
