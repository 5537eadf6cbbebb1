"""The todo list without a graph step of its own (yuxi/agents/todos.py)."""

from __future__ import annotations

from langchain.agents.middleware.types import ModelResponse
from langchain_core.messages import AIMessage

from yuxi.agents.context import BaseContext
from yuxi.agents.graph import build_agent_graph
from yuxi.agents.todos import _one_write


def test_the_graph_has_no_after_model_node_for_todos() -> None:
    context = BaseContext(model="builtin:scripted", tools=[])
    graph = build_agent_graph(context, checkpointer=None)
    nodes = set(graph.get_graph().nodes)
    assert not any("TodoList" in node and "after_model" in node for node in nodes), nodes
    assert "write_todos" in {t for t in graph.nodes["tools"].bound.tools_by_name}  # type: ignore[attr-defined]


def test_of_parallel_writes_only_the_last_is_kept() -> None:
    calls = [
        {"name": "write_todos", "args": {"todos": []}, "id": "a", "type": "tool_call"},
        {"name": "calculator", "args": {"expression": "1+1"}, "id": "b", "type": "tool_call"},
        {"name": "write_todos", "args": {"todos": [{"content": "x", "status": "pending"}]},
         "id": "c", "type": "tool_call"},
    ]  # fmt: skip
    response = _one_write(ModelResponse(result=[AIMessage(content="", tool_calls=calls)]))
    assert isinstance(response, ModelResponse)
    [message] = response.result
    assert isinstance(message, AIMessage)
    assert [c["id"] for c in message.tool_calls] == ["b", "c"]
    single = AIMessage(content="", tool_calls=calls[:2])
    assert _one_write(single) is single
