"""openai:* against a real local HTTP server speaking the chat completions API.

The server runs in a thread of the test process; the model talks to it over real HTTP
(openai SDK, httpx), nothing in the client is mocked.

Server behaviour, chosen by the request:
- model ``boom``: HTTP 500 with an OpenAI-style error body;
- model ``echo-key``: HTTP 500 whose body echoes the Authorization header (a badly
  behaved proxy), to prove the key is masked;
- tools offered and the last message is from the user: one tool call to the first tool;
- last message is a tool result: ``tool said <content>``;
- otherwise: ``Hello from the stub server``.
``"stream": true`` answers as SSE ``data:`` lines in several chunks.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.load import dumpd
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from tests.openai_stub import TEXT, TOOL_ARGS, StubServer, stub_server
from yuxi.agents.models import (
    Capabilities,
    ModelProviderError,
    ModelSettings,
    OpenAICompatibleChatModel,
    load_chat_model,
)

KEY = "sk-yuxi-test-7c2f1a9b4e"


@pytest.fixture
def server() -> Iterator[StubServer]:
    with stub_server() as stub:
        yield stub


def settings_for(server: StubServer, **capabilities: Capabilities) -> ModelSettings:
    from pydantic import SecretStr

    return ModelSettings(
        openai_base_url=server.base_url,
        openai_api_key=SecretStr(KEY),
        capabilities={f"openai:{name}": caps for name, caps in capabilities.items()},
        request_timeout=10.0,
        max_retries=0,
    )


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def assert_key_only_in_authorization(server: StubServer) -> None:
    assert server.requests
    for request in server.requests:
        assert request.headers["authorization"] == f"Bearer {KEY}"
        others = {k: v for k, v in request.headers.items() if k != "authorization"}
        assert KEY not in json.dumps(others)
        assert KEY not in json.dumps(request.body)


async def test_streaming_text(server: StubServer) -> None:
    model = load_chat_model("openai:gpt-stub", settings=settings_for(server))
    chunks = [chunk async for chunk in model.astream("hi")]
    assert len([c for c in chunks if c.content]) >= 3
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    assert total.content == TEXT
    [request] = server.requests
    assert request.body["stream"] is True
    assert request.body["model"] == "gpt-stub"
    assert request.body["messages"] == [{"role": "user", "content": "hi"}]
    assert_key_only_in_authorization(server)


def test_streaming_text_sync(server: StubServer) -> None:
    model = load_chat_model("openai:gpt-stub", settings=settings_for(server))
    chunks = list(model.stream("hi"))
    assert "".join(str(c.content) for c in chunks) == TEXT
    assert server.requests[0].body["stream"] is True


async def test_invoke_is_not_streamed(server: StubServer) -> None:
    model = load_chat_model("openai:gpt-stub", settings=settings_for(server))
    reply = await model.ainvoke("hi")
    assert reply.content == TEXT
    assert not server.requests[0].body.get("stream")


@pytest.mark.parametrize("sync", [False, True])
async def test_without_streaming_capability_stream_makes_one_plain_request(
    server: StubServer, sync: bool
) -> None:
    settings = settings_for(server, plain=Capabilities(streaming=False))
    model = load_chat_model("openai:plain", settings=settings)
    chunks = list(model.stream("hi")) if sync else [c async for c in model.astream("hi")]
    assert [c.content for c in chunks] == [TEXT]
    [request] = server.requests
    assert request.body.get("stream", False) is False
    assert_key_only_in_authorization(server)


@pytest.mark.parametrize("streaming", [True, False])
async def test_agent_message_streaming_follows_the_capability(
    server: StubServer, streaming: bool
) -> None:
    settings = settings_for(server, m=Capabilities(streaming=streaming))
    graph: Any = create_agent(load_chat_model("openai:m", settings=settings), tools=[])
    contents = [
        str(message.content)
        async for message, _meta in graph.astream(
            {"messages": [{"role": "user", "content": "hi"}]}, stream_mode="messages"
        )
    ]
    assert "".join(contents) == TEXT
    [request] = server.requests
    if streaming:
        assert request.body["stream"] is True
        assert len([c for c in contents if c]) >= 3
    else:
        assert request.body.get("stream", False) is False
        assert contents == [TEXT]


async def test_tool_call(server: StubServer) -> None:
    model = load_chat_model("openai:gpt-stub", settings=settings_for(server))
    bound = model.bind_tools([get_weather])
    reply = await bound.ainvoke("weather?")
    assert isinstance(reply, AIMessage)
    assert [(c["name"], c["args"], c["id"]) for c in reply.tool_calls] == [
        ("get_weather", TOOL_ARGS, "call_stub_1")
    ]
    [request] = server.requests
    assert [t["function"]["name"] for t in request.body["tools"]] == ["get_weather"]


async def test_streamed_tool_call(server: StubServer) -> None:
    model = load_chat_model("openai:gpt-stub", settings=settings_for(server))
    chunks = [chunk async for chunk in model.bind_tools([get_weather]).astream("weather?")]
    total: Any = chunks[0]  # typed AIMessage by bind_tools; really AIMessageChunk
    for chunk in chunks[1:]:
        total = total + chunk
    assert isinstance(total, AIMessageChunk)
    assert [(c["name"], c["args"], c["id"]) for c in total.tool_calls] == [
        ("get_weather", TOOL_ARGS, "call_stub_1")
    ]


async def test_agent_loop_over_http(server: StubServer) -> None:
    model = load_chat_model("openai:gpt-stub", settings=settings_for(server))
    graph = create_agent(model, tools=[get_weather], checkpointer=InMemorySaver())
    result = await graph.ainvoke(
        {"messages": [{"role": "user", "content": "weather?"}]},
        {"configurable": {"thread_id": "w"}},
    )
    assert [m.type for m in result["messages"]] == ["human", "ai", "tool", "ai"]
    assert result["messages"][-1].content == "tool said sunny in Paris"
    assert len(server.requests) == 2
    assert_key_only_in_authorization(server)


async def test_without_tool_calling_no_tools_are_sent(server: StubServer) -> None:
    settings = settings_for(server, texty=Capabilities(tool_calling=False))
    model = load_chat_model("openai:texty", settings=settings)
    bound = model.bind_tools([get_weather], tool_choice="auto", parallel_tool_calls=False)
    reply = await bound.ainvoke("weather?")
    assert reply.content == TEXT
    assert reply.tool_calls == []
    # Even tools bound the low-level way never reach the provider.
    await model.bind(tools=[{"type": "function", "function": {"name": "x"}}]).ainvoke("hi")
    for request in server.requests:
        for name in ("tools", "tool_choice", "parallel_tool_calls", "functions"):
            assert name not in request.body


async def test_without_tool_calling_the_agent_answers_in_text(server: StubServer) -> None:
    settings = settings_for(server, texty=Capabilities(tool_calling=False))
    graph = create_agent(
        load_chat_model("openai:texty", settings=settings),
        tools=[get_weather],
        checkpointer=InMemorySaver(),
    )
    result = await graph.ainvoke(
        {"messages": [{"role": "user", "content": "weather?"}]},
        {"configurable": {"thread_id": "t"}},
    )
    assert [m.type for m in result["messages"]] == ["human", "ai"]
    assert result["messages"][-1].content == TEXT
    assert "tools" not in server.requests[0].body


async def test_without_tool_calling_earlier_tool_turns_become_text(server: StubServer) -> None:
    settings = settings_for(server, texty=Capabilities(tool_calling=False))
    model = load_chat_model("openai:texty", settings=settings)
    history = [
        HumanMessage("weather?"),
        AIMessage(
            "",
            tool_calls=[
                {"name": "get_weather", "args": TOOL_ARGS, "id": "c1", "type": "tool_call"}
            ],
        ),
        ToolMessage("sunny", tool_call_id="c1"),
        HumanMessage("and now?"),
    ]
    await model.ainvoke(history)
    sent = server.requests[0].body["messages"]
    assert sent == [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": '[called tool get_weather with {"city": "Paris"}]'},
        {"role": "user", "content": "[tool get_weather returned: sunny]"},
        {"role": "user", "content": "and now?"},
    ]


@pytest.mark.parametrize("mode", ["ainvoke", "astream", "invoke"])
async def test_http_500_is_a_clear_error_without_the_key(
    server: StubServer, caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    caplog.set_level(logging.DEBUG)
    model = load_chat_model("openai:boom", settings=settings_for(server))
    with pytest.raises(Exception) as caught:
        if mode == "ainvoke":
            await model.ainvoke("hi")
        elif mode == "astream":
            [chunk async for chunk in model.astream("hi")]
        else:
            model.invoke("hi")
    message = str(caught.value)
    assert "500" in message
    assert "upstream exploded" in message
    assert KEY not in message
    assert KEY not in repr(caught.value)
    assert KEY not in caplog.text
    assert len(server.requests) == 1  # max_retries=0
    assert_key_only_in_authorization(server)


@pytest.mark.parametrize("mode", ["ainvoke", "astream", "invoke", "stream"])
async def test_a_key_echoed_by_the_provider_is_masked(server: StubServer, mode: str) -> None:
    model = load_chat_model("openai:echo-key", settings=settings_for(server))
    with pytest.raises(ModelProviderError) as caught:
        if mode == "ainvoke":
            await model.ainvoke("hi")
        elif mode == "astream":
            [chunk async for chunk in model.astream("hi")]
        elif mode == "invoke":
            model.invoke("hi")
        else:
            list(model.stream("hi"))
    message = str(caught.value)
    assert message.startswith("openai:echo-key: ")
    assert "bad credentials: Bearer **********" in message
    assert KEY not in message
    # Nothing reachable from the error still holds the original exception.
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None


def test_the_model_object_never_shows_the_key(server: StubServer) -> None:
    model = load_chat_model("openai:gpt-stub", settings=settings_for(server))
    assert isinstance(model, OpenAICompatibleChatModel)
    # dumpd is what callbacks and tracers receive as the model's "serialized" form.
    serialized = json.dumps(dumpd(model), default=str)
    for text in (repr(model), str(model), model.model_dump_json(), serialized):
        assert KEY not in text
    assert KEY not in repr(model.bind_tools([get_weather]))


async def test_logs_never_contain_the_key(
    server: StubServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    model = load_chat_model("openai:gpt-stub", settings=settings_for(server))
    await model.ainvoke("hi")
    [chunk async for chunk in model.astream("hi")]
    assert caplog.records  # the openai SDK and httpx did log the requests
    assert KEY not in caplog.text
