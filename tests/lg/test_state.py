"""A thread's state through RemoteGraph and the SDK: at a checkpoint, its history with
filters, update_state and the run that continues from it, racing runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from langgraph.pregel.remote import RemoteGraph
from langgraph_sdk.errors import (
    BadRequestError,
    ConflictError,
    NotFoundError,
    UnprocessableEntityError,
)

from tests.lg.conftest import Api, Clients

pytestmark = pytest.mark.asyncio(loop_scope="module")


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def contents(values: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in values.get("messages", [])]


@pytest_asyncio.fixture(loop_scope="module")
async def remote(sdk: Clients, api: Api) -> AsyncIterator[RemoteGraph]:
    """Alice's RemoteGraph of the chatbot, as a LangGraph program builds it."""
    graph = RemoteGraph("chatbot", url=sdk.url, api_key=api.tokens["alice"])
    try:
        yield graph
    finally:
        assert graph.client is not None and graph.sync_client is not None
        await graph.client.aclose()
        graph.sync_client.close()


async def native_contents(api: Api, thread_id: str) -> list[str]:
    """The thread's messages as the native history shows them (delivered ones)."""
    history = (await api.history(thread_id))["history"]
    return [
        m["content"]
        for m in history
        if m.get("delivery_status") in (None, "dispatched", "complete")
    ]


async def test_remote_graph_state_history_and_update_then_a_run(
    sdk: Clients, api: Api, remote: RemoteGraph, worker: None
) -> None:
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    await sdk.alice.runs.wait(tid, "chatbot", input=said("one"))
    config: Any = {"configurable": {"thread_id": tid}}

    head = await remote.aget_state(config)
    assert [m["content"] for m in head.values["messages"]] == ["one", "echo: one"]
    assert head.parent_config is not None
    parent = await remote.aget_state(head.parent_config)
    parent_id = head.parent_config["configurable"]["checkpoint_id"]
    assert parent.config["configurable"]["checkpoint_id"] == parent_id
    by_id = await sdk.alice.threads.get_state(
        tid, checkpoint_id=head.config["configurable"]["checkpoint_id"]
    )
    assert contents(by_id["values"]) == ["one", "echo: one"]

    history = [s async for s in remote.aget_state_history(config)]
    assert history[0].config == head.config and len(history) >= 3
    inputs = [s async for s in remote.aget_state_history(config, filter={"source": "input"})]
    assert inputs and all(s.metadata["source"] == "input" for s in inputs)
    assert len(inputs) < len(history)
    one = [s async for s in remote.aget_state_history(head.parent_config)]
    assert [s.config for s in one] == [head.parent_config]

    written = await remote.aupdate_state(config, said("added"))
    state = await sdk.alice.threads.get_state(tid)
    assert state["checkpoint"]["checkpoint_id"] == written["configurable"]["checkpoint_id"]
    assert contents(state["values"]) == ["one", "echo: one", "added"]
    assert state["metadata"]["source"] == "update"
    assert await native_contents(api, tid) == ["one", "echo: one", "added"]

    values = await sdk.alice.runs.wait(tid, "chatbot", input=said("two"))
    expected = ["one", "echo: one", "added", "two", "echo: two"]
    assert contents(values) == expected
    assert await native_contents(api, tid) == expected

    ai = {"type": "ai", "content": "said by hand"}
    await sdk.alice.threads.update_state(tid, {"messages": [ai]}, as_node="model")
    assert contents((await sdk.alice.threads.get_state(tid))["values"])[-1] == "said by hand"
    assert (await native_contents(api, tid))[-1] == "said by hand"

    existing = (await sdk.alice.threads.get_state(tid))["values"]["messages"][0]
    stale = {"thread_id": tid, "checkpoint_ns": "", **head.config["configurable"]}
    for refused in (
        {"values": {"messages": [existing | {"content": "rewritten"}]}},
        {"values": {"messages": [{"role": "system", "content": "be brief"}]}},
        {"values": said("late"), "checkpoint": stale},
    ):
        with pytest.raises(UnprocessableEntityError):
            await sdk.alice.threads.update_state(tid, **refused)
    with pytest.raises(BadRequestError):
        await sdk.alice.threads.update_state(tid, {"nonsense": 1})
    with pytest.raises(BadRequestError):
        await sdk.alice.threads.update_state(tid, said("x"), as_node="nowhere")
    assert await native_contents(api, tid) == [*expected, "said by hand"]

    with pytest.raises(NotFoundError):
        await sdk.bob.threads.get_state(tid, checkpoint=stale)
    with pytest.raises(NotFoundError):
        await sdk.bob.threads.get_state(tid, checkpoint_id=stale["checkpoint_id"])
    with pytest.raises(NotFoundError):
        await sdk.bob.threads.update_state(tid, said("mine"))
    with pytest.raises(NotFoundError):
        await sdk.bob.threads.get_history(tid, checkpoint={"thread_id": tid, "checkpoint_ns": ""})
    with pytest.raises(NotFoundError):
        await sdk.alice.threads.get_state(tid, checkpoint_id="1f000000-0000-6000-8000-000000000000")


async def test_update_state_racing_runs_never_splits_state_and_history(
    sdk: Clients, api: Api, worker: None
) -> None:
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    await sdk.alice.runs.wait(tid, "chatbot", input=said("start"))

    async def update(n: int) -> bool:
        try:
            await sdk.alice.threads.update_state(tid, said(f"edit {n}"))
        except ConflictError:  # a run was active or waiting: refused, nothing written
            return False
        return True

    outcomes: list[bool] = []
    for round_no in range(4):
        results = await asyncio.gather(
            *(update(10 * round_no + i) for i in range(3)),
            sdk.alice.runs.create(tid, "chatbot", input=said(f"run {round_no}")),
        )
        outcomes += [r for r in results if isinstance(r, bool)]
        run = results[-1]
        assert isinstance(run, dict)
        await sdk.alice.runs.join(tid, run["run_id"])
        state = await sdk.alice.threads.get_state(tid)
        assert contents(state["values"]) == await native_contents(api, tid)
        assert contents(state["values"])[-1] == f"echo: run {round_no}"
    assert any(outcomes)
