"""The models' own callback (yuxi.agents.models.usage): a run's model text reaches its
events as the model produces it, once, and never a summary's."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage
from langgraph.constants import TAG_NOSTREAM

from yuxi.agents.models import ScriptedChatModel, load_chat_model
from yuxi.agents.models.usage import MODEL_RELAY
from yuxi.agents.services import RunServices, run_services

pytestmark = pytest.mark.asyncio


class Sink:
    def __init__(self) -> None:
        self.chunks: list[tuple[str | None, str]] = []

    def message_chunk(self, message_id: str | None, text: str) -> None:
        self.chunks.append((message_id, text))


async def call(model_spec: str = "builtin:scripted", **config: object) -> tuple[Sink, str, str]:
    model = load_chat_model(model_spec)
    sink = Sink()
    with run_services(RunServices(text=sink)):
        reply = await model.ainvoke([HumanMessage("hello there")], config=config)  # type: ignore[arg-type]
    return sink, str(reply.id), str(reply.content)


async def test_inside_a_run_a_call_streams_its_text_to_the_run_once() -> None:
    sink, reply_id, text = await call()
    assert text == "echo: hello there"
    # streamed: several chunks, all of the reply's message, that add up to it once
    assert len(sink.chunks) > 1
    assert {message_id for message_id, _ in sink.chunks} == {reply_id}
    assert "".join(chunk for _, chunk in sink.chunks) == text


async def test_a_call_tagged_nostream_sends_nothing() -> None:
    sink, _, text = await call(tags=[TAG_NOSTREAM])  # how summaries are made
    assert text == "echo: hello there"
    assert sink.chunks == []


async def test_outside_a_run_nothing_is_sent_and_nothing_breaks() -> None:
    model = load_chat_model("builtin:scripted")
    reply = await model.ainvoke([HumanMessage("hi")])
    assert reply.content == "echo: hi"


async def test_a_model_that_cannot_stream_sends_its_whole_text_at_the_end() -> None:
    model = ScriptedChatModel(disable_streaming=True, callbacks=[MODEL_RELAY])
    sink = Sink()
    with run_services(RunServices(text=sink)):
        reply = await model.ainvoke([HumanMessage("hello there")])
    assert sink.chunks == [(reply.id, "echo: hello there")]
