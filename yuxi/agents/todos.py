"""The agents' todo list: LangChain's ``TodoListMiddleware`` (the ``write_todos`` tool,
the state's ``todos``, its system-prompt section) without its ``after_model`` hook.

That hook refuses a model turn with several parallel ``write_todos`` calls, and being a
hook it is a graph node: one more superstep, so one more checkpoint and its writes,
after every model call of every run. The same rule is kept here inside the model call,
at no step's cost: of parallel ``write_todos`` calls only the last is kept (each call
replaces the whole list, so the last one is what the model meant to leave).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import ModelRequest, TodoListMiddleware
from langchain.agents.middleware.types import AgentMiddleware, ModelResponse
from langchain_core.messages import AIMessage

WRITE_TODOS = "write_todos"


class TodoList(TodoListMiddleware):
    """``TodoListMiddleware`` whose one-write-per-turn rule costs no graph step."""

    # not overridden as far as create_agent can tell: no after_model node
    after_model = AgentMiddleware.after_model
    aafter_model = AgentMiddleware.aafter_model

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage:
        return _one_write(super().wrap_model_call(request, handler))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        return _one_write(await super().awrap_model_call(request, handler))


def _one_write(response: ModelResponse[Any] | AIMessage) -> ModelResponse[Any] | AIMessage:
    if isinstance(response, AIMessage):
        return _kept(response)
    response.result = [_kept(m) if isinstance(m, AIMessage) else m for m in response.result]
    return response


def _kept(message: AIMessage) -> AIMessage:
    writes = [call for call in message.tool_calls if call["name"] == WRITE_TODOS]
    if len(writes) < 2:
        return message
    last = writes[-1]["id"]
    kept = [c for c in message.tool_calls if c["name"] != WRITE_TODOS or c["id"] == last]
    return message.model_copy(update={"tool_calls": kept})
