"""builtin:scripted inside langchain's create_agent with a checkpointer."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessageChunk
from langchain_core.tools import ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from yuxi.agents.models import Capabilities, ModelSettings, ScriptedModelError, load_chat_model


@tool
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@tool
def explode() -> str:
    """Always fails."""
    raise ToolException("kaboom")


# A tool error becomes a ToolMessage with status "error" instead of an exception.
explode.handle_tool_error = True


@tool
def ask_user(question: str) -> str:
    """Asks the user and waits for the answer."""
    return str(interrupt({"question": question}))


def agent() -> Any:
    # Any: tests stream with plain dict input, which the typed overloads reject.
    model = load_chat_model("builtin:scripted")
    return create_agent(model, tools=[add, explode, ask_user], checkpointer=InMemorySaver())


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def test_tool_directive_runs_the_tool() -> None:
    result = await agent().ainvoke(user('/tool add {"a": 2, "b": 40}'), config("t1"))
    assert [m.type for m in result["messages"]] == ["human", "ai", "tool", "ai"]
    assert result["messages"][2].content == "42"
    assert result["messages"][-1].content == "tool add returned: 42"


def test_tool_directive_runs_the_tool_sync() -> None:
    result = agent().invoke(user('/tool add {"a": 1, "b": 1}'), config("t1"))
    assert result["messages"][-1].content == "tool add returned: 2"


async def test_a_failing_tool_is_reported() -> None:
    result = await agent().ainvoke(user("/tool explode {}"), config("t2"))
    assert result["messages"][2].status == "error"
    assert result["messages"][-1].content == "tool explode failed: kaboom"


async def test_unknown_tool_is_not_called() -> None:
    result = await agent().ainvoke(user("/tool rm_rf {}"), config("t3"))
    assert [m.type for m in result["messages"]] == ["human", "ai"]
    assert result["messages"][-1].content == "tool rm_rf is not available"


async def test_ask_interrupts_and_resumes() -> None:
    graph = agent()
    first = await graph.ainvoke(user("/ask favourite colour?"), config("t4"))
    [pending] = first["__interrupt__"]
    assert pending.value == {"question": "favourite colour?"}
    resumed = await graph.ainvoke(Command(resume="blue"), config("t4"))
    assert resumed["messages"][-1].content == "you answered: blue"
    # The next turn starts from the new human message.
    later = await graph.ainvoke(user("thanks"), config("t4"))
    assert later["messages"][-1].content == "echo: thanks"


async def test_fail_propagates_out_of_the_graph() -> None:
    with pytest.raises(ScriptedModelError) as caught:
        await agent().ainvoke(user("/fail model down"), config("t5"))
    # LangGraph adds a note naming the task; the message itself is TEXT.
    assert str(caught.value) == "model down"


async def test_message_streaming_is_word_by_word() -> None:
    tokens: list[str] = []
    async for message, _meta in agent().astream(
        user("one two three"), config("t6"), stream_mode="messages"
    ):
        assert isinstance(message, AIMessageChunk)
        tokens.append(str(message.content))
    assert tokens == ["echo: ", "one ", "two ", "three"]


async def test_message_streaming_without_the_streaming_capability() -> None:
    settings = ModelSettings(capabilities={"builtin:scripted": Capabilities(streaming=False)})
    graph: Any = create_agent(
        load_chat_model("builtin:scripted", settings=settings),
        tools=[add],
        checkpointer=InMemorySaver(),
    )
    contents = [
        str(message.content)
        async for message, _meta in graph.astream(
            user("one two three"), config("t7"), stream_mode="messages"
        )
    ]
    assert contents == ["echo: one two three"]


@pytest.mark.parametrize(
    ("decision", "reply"),
    [
        ("approve", "tool add returned: 3"),
        ("reject", "tool add failed: User rejected the tool call for `add`"),
    ],
)
async def test_tool_approval_decisions(decision: str, reply: str) -> None:
    approval = HumanInTheLoopMiddleware(
        interrupt_on={"add": {"allowed_decisions": ["approve", "reject"]}}
    )
    graph: Any = create_agent(
        load_chat_model("builtin:scripted"),
        tools=[add],
        middleware=[approval],
        checkpointer=InMemorySaver(),
    )
    first = await graph.ainvoke(user('/tool add {"a": 1, "b": 2}'), config(decision))
    assert first["__interrupt__"]
    result = await graph.ainvoke(
        Command(resume={"decisions": [{"type": decision}]}), config(decision)
    )
    assert str(result["messages"][-1].content).startswith(reply)
