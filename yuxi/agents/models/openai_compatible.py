"""``openai:*``: any OpenAI-compatible chat completions endpoint.

A thin subclass of langchain-openai's ChatOpenAI that makes the capability flags real:

- ``streaming`` false: ``disable_streaming=True``, so ``stream``/``astream`` and graph
  message streaming fall back to one non-streaming request (``"stream": false``).
- ``tool_calling`` false: ``bind_tools`` binds no tools and every request is stripped of
  tool fields; earlier tool calls and results in the history are rewritten as text, so
  the model works on a plain text conversation.

The API key is passed as a ``SecretStr`` and used only by the HTTP client. Should a
provider echo it back in an error, the error is re-raised with the key masked.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from yuxi.agents.models.usage import StreamsInRuns

# Request fields through which a model is offered tools (current and legacy API).
_TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call")
_MASK = "**********"


class ModelProviderError(RuntimeError):
    """A provider error whose original message contained the API key (now masked)."""


class OpenAICompatibleChatModel(StreamsInRuns, ChatOpenAI):
    """ChatOpenAI for OpenAI-compatible endpoints, honouring yuxi's capability flags."""

    spec: str = ""
    """The ``provider:model`` spec this model was loaded from (for error messages)."""

    tool_calling: bool = True
    """Capability flag; when false the model is only ever sent text."""

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: dict[str, Any] | str | bool | None = None,
        strict: bool | None = None,
        parallel_tool_calls: bool | None = None,
        response_format: dict[str, Any] | type | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Binds tools, or, without the ``tool_calling`` capability, binds only the
        non-tool options so the model answers in text."""
        if self.tool_calling:
            return super().bind_tools(
                tools,
                tool_choice=tool_choice,
                strict=strict,
                parallel_tool_calls=parallel_tool_calls,
                response_format=response_format,
                **kwargs,
            )
        rest = {k: v for k, v in kwargs.items() if k not in _TOOL_FIELDS}
        if response_format is not None:
            rest["response_format"] = response_format
        return self.bind(**rest) if rest else self

    def _get_request_payload(
        self,
        input_: LanguageModelInput,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        if self.tool_calling:
            return super()._get_request_payload(input_, stop=stop, **kwargs)
        messages = _as_text_conversation(self._convert_input(input_).to_messages())
        payload: dict[str, Any] = super()._get_request_payload(messages, stop=stop, **kwargs)
        # Also catches tools arriving through bind(tools=...) or model_kwargs.
        for name in _TOOL_FIELDS:
            payload.pop(name, None)
        return payload

    # -- provider errors never carry the key ----------------------------------------
    # Each override re-raises a masked error *after* its except block: raised inside
    # it, the original exception (key included) would stay reachable as __context__
    # and be printed by any logged traceback.

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        try:
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        except Exception as exc:
            masked = self._masked(exc)
            if masked is None:
                raise
        raise masked

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        try:
            return await super()._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)
        except Exception as exc:
            masked = self._masked(exc)
            if masked is None:
                raise
        raise masked

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        masked: ModelProviderError | None = None
        try:
            yield from super()._stream(*args, **kwargs)
        except Exception as exc:
            masked = self._masked(exc)
            if masked is None:
                raise
        if masked is not None:
            raise masked

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        masked: ModelProviderError | None = None
        try:
            async for chunk in super()._astream(*args, **kwargs):
                yield chunk
        except Exception as exc:
            masked = self._masked(exc)
            if masked is None:
                raise
        if masked is not None:
            raise masked

    def _masked(self, exc: Exception) -> ModelProviderError | None:
        """A key-free copy of ``exc`` if its chain mentions the API key, else None."""
        key = self.openai_api_key
        secret = key.get_secret_value() if isinstance(key, SecretStr) else ""
        if not secret or not _chain_mentions(exc, secret):
            return None
        message = str(exc).replace(secret, _MASK)
        return ModelProviderError(f"{self.spec or self.model_name}: {message}")


def _chain_mentions(exc: BaseException, secret: str) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if secret in str(current) or secret in repr(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def _as_text_conversation(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Rewrites tool calls and tool results as text, for a model without function
    calling that inherits a conversation another model made tool calls in."""
    names: dict[str, str] = {}
    result: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            lines: list[str] = [str(message.text)] if message.text else []
            for call in message.tool_calls:
                names[call["id"] or ""] = call["name"]
                lines.append(f"[called tool {call['name']} with {json.dumps(call['args'])}]")
            result.append(AIMessage(content="\n".join(lines), id=message.id, name=message.name))
        elif isinstance(message, ToolMessage):
            name = message.name or names.get(message.tool_call_id, "tool")
            verb = "failed" if message.status == "error" else "returned"
            result.append(HumanMessage(content=f"[tool {name} {verb}: {message.text}]"))
        else:
            result.append(message)
    return result
