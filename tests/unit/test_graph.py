"""The compiled agent graph: shared between runs of the same shape, prompt per run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
from langchain.agents.middleware.todo import WRITE_TODOS_SYSTEM_PROMPT
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from yuxi.agents import graph as agent_graph
from yuxi.agents.chatbot import ChatBotContext
from yuxi.agents.models import ScriptedChatModel


class RecordingModel(ScriptedChatModel):
    """The scripted model, remembering the system prompt of each call."""

    prompts: ClassVar[list[str]] = []

    def _plan(self, messages: Sequence[BaseMessage]) -> Any:
        system = [m for m in messages if m.type == "system"]
        RecordingModel.prompts.append(system[0].text if system else "")
        return super()._plan(messages)


def without_todo_section(prompt: str) -> str:
    """The prompt before the section TodoListMiddleware appends (which must be there)."""
    suffix = "\n\n" + WRITE_TODOS_SYSTEM_PROMPT
    assert prompt.endswith(suffix), prompt
    return prompt.removesuffix(suffix)


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    RecordingModel.prompts = []
    monkeypatch.setattr(
        agent_graph,
        "load_chat_model",
        lambda spec, registered=None, json_replies=False: RecordingModel(),
    )
    monkeypatch.setattr(agent_graph, "_GRAPHS", type(agent_graph._GRAPHS)())
    return RecordingModel.prompts


async def test_runs_of_one_shape_share_a_graph_but_see_their_own_prompt(
    recording: list[str],
) -> None:
    saver = InMemorySaver()
    alice = ChatBotContext(
        model="builtin:scripted",
        tools=["calculator"],
        system_prompt="Be brief.",
        workspace_prompt="Alice prefers French.",
    )
    bob = ChatBotContext(
        model="builtin:scripted",
        tools=["calculator"],
        system_prompt="Be brief.",
        memory="Bob's cat is Tom.",
    )
    first = agent_graph.build_agent_graph(alice, checkpointer=saver)
    assert agent_graph.build_agent_graph(bob, checkpointer=saver) is first
    for name, context in (("a", alice), ("b", bob)):
        await first.ainvoke(
            {"messages": [{"role": "user", "content": "hi"}]},
            {"configurable": {"thread_id": name}},
            context=context,
        )
    assert without_todo_section(recording[0]) == "Be brief.\n\nAlice prefers French."
    assert without_todo_section(recording[1]).startswith("Be brief.\n\nThe user keeps these notes")
    assert without_todo_section(recording[1]).endswith("Bob's cat is Tom.")


def test_a_different_shape_gets_its_own_graph(recording: list[str]) -> None:
    saver = InMemorySaver()
    base = ChatBotContext(model="builtin:scripted", tools=["calculator"])
    graph = agent_graph.build_agent_graph(base, checkpointer=saver)
    for changed in (
        ChatBotContext(model="builtin:scripted", tools=["read_file"]),
        ChatBotContext(model="builtin:scripted", tools=["calculator"], tool_approval_mode="ask"),
        ChatBotContext(model="builtin:scripted", tools=["calculator"], summary_threshold=5),
    ):
        assert agent_graph.build_agent_graph(changed, checkpointer=saver) is not graph
    assert agent_graph.build_agent_graph(base, checkpointer=InMemorySaver()) is not graph


def test_a_registry_models_context_window_also_triggers_summaries() -> None:
    from yuxi.agents.context import BaseContext
    from yuxi.agents.graph import summary_triggers
    from yuxi.agents.models import RegisteredModel

    context = BaseContext(model="openai:big", summary_threshold=120)
    assert summary_triggers(context) == [("messages", 120)]
    context.registered_model = RegisteredModel(
        id="m1", spec="openai:big", version="v1", byok=False, context_window=8000
    )
    assert summary_triggers(context) == [("messages", 120), ("tokens", 6400)]
    context.registered_model = RegisteredModel(id="m2", spec="openai:big", version="v1", byok=False)
    assert summary_triggers(context) == [("messages", 120)]
