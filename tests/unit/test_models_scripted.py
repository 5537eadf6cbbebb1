"""builtin:scripted, directive by directive, through invoke/ainvoke/stream/astream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool

from yuxi.agents.models import ASK_USER_TOOL_NAME, ScriptedChatModel, ScriptedModelError

ASK = ASK_USER_TOOL_NAME

MODES = ("invoke", "ainvoke", "stream", "astream")


async def run(
    model: BaseChatModel | Any, messages: Sequence[BaseMessage] | str, mode: str
) -> tuple[AIMessage | AIMessageChunk, int]:
    """The reply and the number of chunks it arrived in."""
    if mode == "invoke":
        return model.invoke(messages), 1
    if mode == "ainvoke":
        return await model.ainvoke(messages), 1
    chunks: list[AIMessageChunk] = []
    if mode == "stream":
        chunks = list(model.stream(messages))
    else:
        chunks = [chunk async for chunk in model.astream(messages)]
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    return total, len(chunks)


@tool
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


def human(text: str) -> list[BaseMessage]:
    return [SystemMessage("be scripted"), HumanMessage(text)]


@pytest.mark.parametrize("mode", MODES)
async def test_echo_repeats_the_message_verbatim(mode: str) -> None:
    reply, chunks = await run(ScriptedChatModel(), human("hello  big world "), mode)
    assert reply.content == "echo: hello  big world "
    assert reply.tool_calls == []
    if mode in ("stream", "astream"):
        assert chunks >= 4  # word by word


@pytest.mark.parametrize("mode", MODES)
async def test_echo_of_a_plain_string_input(mode: str) -> None:
    reply, _ = await run(ScriptedChatModel(), "hi", mode)
    assert reply.content == "echo: hi"


@pytest.mark.parametrize("mode", MODES)
async def test_sleep_waits_then_replies_with_n_as_written(mode: str) -> None:
    started = time.monotonic()
    reply, _ = await run(ScriptedChatModel(), human("/sleep 0.050"), mode)
    assert time.monotonic() - started >= 0.05
    assert reply.content == "slept 0.050"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("argument", ["", "soon", "-1", "nan"])
async def test_sleep_without_a_usable_number_explains(mode: str, argument: str) -> None:
    reply, _ = await run(ScriptedChatModel(), human(f"/sleep {argument}"), mode)
    assert str(reply.content).startswith("usage: /sleep SECONDS")


@pytest.mark.parametrize("mode", ["ainvoke", "astream"])
async def test_sleep_is_cancellable(mode: str) -> None:
    task = asyncio.create_task(run(ScriptedChatModel(), human("/sleep 30"), mode))
    await asyncio.sleep(0.05)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 1


@pytest.mark.parametrize("mode", MODES)
async def test_fail_raises_with_the_text(mode: str) -> None:
    with pytest.raises(ScriptedModelError) as caught:
        await run(ScriptedChatModel(), human("/fail the disk is on fire"), mode)
    assert str(caught.value) == "the disk is on fire"
    assert isinstance(caught.value, RuntimeError)


@pytest.mark.parametrize("mode", MODES)
async def test_tool_directive_calls_the_tool(mode: str) -> None:
    reply, chunks = await run(ScriptedChatModel(), human('/tool add {"a": 1, "b": 2}'), mode)
    assert reply.content == ""
    assert reply.tool_calls == [
        {"name": "add", "args": {"a": 1, "b": 2}, "id": "call_1", "type": "tool_call"}
    ]
    if mode in ("stream", "astream"):
        assert chunks == 1
        assert isinstance(reply, AIMessageChunk)
        assert [c["name"] for c in reply.tool_call_chunks] == ["add"]


@pytest.mark.parametrize("mode", MODES)
async def test_tool_without_arguments_gets_an_empty_object(mode: str) -> None:
    reply, _ = await run(ScriptedChatModel(), human("/tool get_current_time"), mode)
    assert reply.tool_calls[0]["args"] == {}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ('{"a": 1', "invalid JSON arguments for tool add: Expecting"),
        ("[1, 2]", "invalid JSON arguments for tool add: expected an object"),
    ],
)
async def test_tool_with_bad_json_explains(mode: str, arguments: str, message: str) -> None:
    reply, _ = await run(ScriptedChatModel(), human(f"/tool add {arguments}"), mode)
    assert str(reply.content).startswith(message)
    assert reply.tool_calls == []


async def test_tool_without_a_name_explains() -> None:
    reply = await ScriptedChatModel().ainvoke(human("/tool"))
    assert reply.content == "usage: /tool NAME {json arguments}"


@pytest.mark.parametrize("mode", MODES)
async def test_todo_writes_one_todo_per_item(mode: str) -> None:
    reply, _ = await run(ScriptedChatModel(), human("/todo plan;  [x] read ; [~] write;;"), mode)
    assert reply.tool_calls == [
        {
            "name": "write_todos",
            "args": {
                "todos": [
                    {"content": "plan", "status": "pending"},
                    {"content": "read", "status": "completed"},
                    {"content": "write", "status": "in_progress"},
                ]
            },
            "id": "call_1",
            "type": "tool_call",
        }
    ]


@pytest.mark.parametrize("text", ["/todo", "/todo ; ;", "/todo [x] "])
async def test_todo_without_items_explains(text: str) -> None:
    reply = await ScriptedChatModel().ainvoke(human(text))
    assert reply.content == "usage: /todo ITEM; ITEM; ... ([x] done, [~] in progress)"


@pytest.mark.parametrize("mode", MODES)
async def test_ask_calls_ask_user(mode: str) -> None:
    reply, _ = await run(ScriptedChatModel(), human("/ask what is your favourite colour?"), mode)
    assert reply.tool_calls == [
        {
            "name": ASK_USER_TOOL_NAME,
            "args": {"question": "what is your favourite colour?"},
            "id": "call_1",
            "type": "tool_call",
        }
    ]


async def test_ask_without_a_question_explains() -> None:
    reply = await ScriptedChatModel().ainvoke(human("/ask"))
    assert reply.content == "usage: /ask QUESTION"


def answered(directive: str, name: str, content: str, status: str = "success") -> list[BaseMessage]:
    call = {"name": name, "args": {}, "id": "call_1", "type": "tool_call"}
    return [
        *human(directive),
        AIMessage(content="", tool_calls=[call]),
        ToolMessage(content=content, tool_call_id="call_1", name=name, status=status),
    ]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (answered('/tool add {"a": 1, "b": 2}', "add", "3"), "tool add returned: 3"),
        (answered("/tool add {}", "add", "Error: boom", "error"), "tool add failed: Error: boom"),
        (answered("/ask colour?", ASK_USER_TOOL_NAME, "blue"), "you answered: blue"),
        (
            answered("/ask colour?", ASK_USER_TOOL_NAME, "rejected", "error"),
            "you answered: rejected",
        ),
        # /tool ask_user is a /tool directive, so it reports like one.
        (answered("/tool ask_user {}", ASK_USER_TOOL_NAME, "x"), "tool ask_user returned: x"),
    ],
)
async def test_reply_after_the_tool_answered(
    mode: str, messages: list[BaseMessage], expected: str
) -> None:
    reply, _ = await run(ScriptedChatModel(), messages, mode)
    assert reply.content == expected
    assert reply.tool_calls == []


async def test_tool_name_falls_back_to_the_tool_message_name() -> None:
    messages = [*human("/tool add {}"), ToolMessage(content="7", tool_call_id="x", name="add")]
    reply = await ScriptedChatModel().ainvoke(messages)
    assert reply.content == "tool add returned: 7"


async def test_only_the_latest_human_message_counts() -> None:
    messages = [
        *answered("/fail old", "add", "3"),
        AIMessage("tool add returned: 3"),
        HumanMessage("/tool add {}"),
    ]
    reply = await ScriptedChatModel().ainvoke(messages)
    # One tool call is already in the conversation, so this one is call_2.
    assert reply.tool_calls[0]["id"] == "call_2"


async def test_without_any_human_message_it_echoes_nothing() -> None:
    reply = await ScriptedChatModel().ainvoke([SystemMessage("only a system prompt")])
    assert reply.content == "echo: "


@pytest.mark.parametrize("mode", MODES)
async def test_bound_tools_limit_what_can_be_called(mode: str) -> None:
    model = ScriptedChatModel().bind_tools([add, {"name": "ask_user", "parameters": {}}])
    assert isinstance(model, ScriptedChatModel)
    assert model.tool_names == ("add", "ask_user")
    reply, _ = await run(model, human("/tool add {}"), mode)
    assert reply.tool_calls[0]["name"] == "add"
    reply, _ = await run(model, human("/tool delete_everything {}"), mode)
    assert reply.content == "tool delete_everything is not available"
    assert reply.tool_calls == []
    reply, _ = await run(model, human("/ask colour?"), mode)
    assert reply.tool_calls[0]["name"] == ASK_USER_TOOL_NAME


def test_bind_tools_accepts_every_tool_form_and_keeps_the_original() -> None:
    def multiply(a: int, b: int) -> int:
        """Multiplies."""
        return a * b

    original = ScriptedChatModel()
    bound = original.bind_tools(
        [add, multiply, {"type": "function", "function": {"name": "f"}}, {"type": "web_search"}],
        tool_choice="auto",
        parallel_tool_calls=False,
    )
    assert isinstance(bound, ScriptedChatModel)
    assert bound.tool_names == ("add", "multiply", "f")
    assert original.tool_names is None


async def test_without_tool_calling_nothing_is_callable() -> None:
    model = ScriptedChatModel(tool_calling=False).bind_tools([add])
    reply = await model.ainvoke(human("/tool add {}"))
    assert reply.content == "tool add is not available"
    reply = await model.ainvoke(human("/ask colour?"))
    assert reply.content == "tool ask_user is not available"


@pytest.mark.parametrize(
    "text",
    ["hello there", '/tool add {"a": [1, {"b": null}]}', "/ask why?", "/sleep 0", "/tool x {"],
)
async def test_streaming_aggregates_to_the_non_streaming_reply(text: str) -> None:
    model = ScriptedChatModel()
    plain = await model.ainvoke(human(text))
    for mode in ("stream", "astream"):
        streamed, _ = await run(model, human(text), mode)
        assert streamed.content == plain.content
        assert streamed.tool_calls == plain.tool_calls
        assert streamed.invalid_tool_calls == []


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_disabled_streaming_yields_one_chunk(mode: str) -> None:
    reply, chunks = await run(ScriptedChatModel(disable_streaming=True), human("a b c d"), mode)
    assert chunks == 1
    assert reply.content == "echo: a b c d"


def test_llm_type() -> None:
    assert ScriptedChatModel()._llm_type == "builtin-scripted"
