"""A thread's state and the thread as a whole through RemoteGraph and the SDK: state at a
checkpoint, history with filters, update_state and the run that continues from it
(racing runs too), copy, count, prune, a thread's stream, run delete and cancel_many;
another user's are 404. One module: one server and one worker for all of it."""

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
    with pytest.raises(UnprocessableEntityError):  # several updates at once
        await sdk.alice.threads.update_state(tid, [said("a"), said("b")])
    for bad in (
        {"nonsense": 1},
        {"branch:to:model": None},
        {"messages": [{"role": "user"}]},
        {"messages": [{"type": "tool", "content": "no call id"}]},
        {"messages": [7]},
    ):
        with pytest.raises(BadRequestError):
            await sdk.alice.threads.update_state(tid, bad)
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


async def test_update_state_seeds_a_thread_that_never_ran(
    sdk: Clients, api: Api, worker: None
) -> None:
    thread = await sdk.alice.threads.create(metadata={"graph_id": "chatbot"})
    tid = thread["thread_id"]
    await sdk.alice.threads.update_state(tid, said("seed"))
    assert contents((await sdk.alice.threads.get_state(tid))["values"]) == ["seed"]
    values = await sdk.alice.runs.wait(tid, "chatbot", input=said("go"))
    assert contents(values) == ["seed", "go", "echo: go"]
    assert await native_contents(api, tid) == ["seed", "go", "echo: go"]
    unbound = await sdk.alice.threads.create()
    with pytest.raises(UnprocessableEntityError):
        await sdk.alice.threads.update_state(unbound["thread_id"], said("seed"))


async def until_running(sdk: Clients, tid: str, run_id: str) -> None:
    for _ in range(200):
        if (await sdk.alice.runs.get(tid, run_id))["status"] == "running":
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} never ran")


async def test_copy_count_and_prune(sdk: Clients, api: Api, worker: None) -> None:
    source = await sdk.alice.threads.create(metadata={"kind": "copied"})
    sid = source["thread_id"]
    await sdk.alice.runs.wait(sid, "chatbot", input=said("one"))
    copy = await sdk.alice.threads.copy(sid)
    assert copy is not None
    cid = copy["thread_id"]
    assert cid != sid
    assert copy["metadata"] == {"kind": "copied", "graph_id": "chatbot", "assistant_id": "chatbot"}
    assert contents(copy["values"]) == ["one", "echo: one"]
    source_history = await sdk.alice.threads.get_history(sid, limit=100)
    copy_history = await sdk.alice.threads.get_history(cid, limit=100)
    assert [h["values"] for h in copy_history] == [h["values"] for h in source_history]
    native = [m["content"] for m in (await api.history(cid))["history"]]
    assert native == ["one", "echo: one"]
    values = await sdk.alice.runs.wait(cid, "chatbot", input=said("two"))
    assert contents(values) == ["one", "echo: one", "two", "echo: two"]
    assert contents((await sdk.alice.threads.get(sid))["values"]) == ["one", "echo: one"]
    with pytest.raises(NotFoundError):
        await sdk.bob.threads.copy(sid)

    assert await sdk.alice.threads.count(metadata={"kind": "copied"}) == 2
    assert await sdk.alice.threads.count(metadata={"kind": "copied"}, status="busy") == 0
    assert await sdk.bob.threads.count(metadata={"kind": "copied"}) == 0
    with pytest.raises(UnprocessableEntityError):
        await sdk.alice.threads.count(values={"messages": []})

    with pytest.raises(NotFoundError):
        await sdk.bob.threads.prune([sid])
    pruned = await sdk.alice.threads.prune([cid], strategy="keep_latest")
    assert pruned == {"pruned_count": 1}
    kept = await sdk.alice.threads.get_history(cid, limit=100)
    assert len(kept) == 1 and contents(kept[0]["values"])[-1] == "echo: two"
    assert (await sdk.alice.threads.get_state(cid))["checkpoint"] == kept[0]["checkpoint"]
    assert await sdk.alice.threads.prune([sid, cid]) == {"pruned_count": 2}
    assert await sdk.alice.threads.count(metadata={"kind": "copied"}) == 0
    with pytest.raises(NotFoundError):
        await sdk.alice.threads.get(sid)


async def test_run_delete_cancel_many_and_the_thread_stream(
    sdk: Clients, api: Api, worker: None
) -> None:
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    done = await sdk.alice.runs.create(tid, "chatbot", input=said("first"))
    await sdk.alice.runs.join(tid, done["run_id"])
    with pytest.raises(NotFoundError):
        await sdk.bob.runs.delete(tid, done["run_id"])
    await sdk.alice.runs.delete(tid, done["run_id"])
    assert await sdk.alice.runs.list(tid) == []
    with pytest.raises(NotFoundError):
        await sdk.alice.runs.get(tid, done["run_id"])
    with pytest.raises(NotFoundError):
        await sdk.alice.runs.delete(tid, done["run_id"])
    # its messages stay: the native history and the next run's values hold them
    assert [m["content"] for m in (await api.history(tid))["history"]] == ["first", "echo: first"]

    running = await sdk.alice.runs.create(tid, "chatbot", input=said("/sleep 30"))
    queued = await sdk.alice.runs.create(tid, "chatbot", input=said("later"))
    await until_running(sdk, tid, running["run_id"])
    with pytest.raises(ConflictError):
        await sdk.alice.runs.delete(tid, running["run_id"])
    with pytest.raises(ConflictError):
        await sdk.alice.threads.update_state(tid, said("meanwhile"))
    with pytest.raises(ConflictError):
        await sdk.alice.threads.copy(tid)
    with pytest.raises(NotFoundError):
        await sdk.bob.runs.cancel_many(thread_id=tid, run_ids=[queued["run_id"]])
    await sdk.bob.runs.cancel_many(status="all")  # none of bob's: alice's keep running
    assert (await sdk.alice.runs.get(tid, running["run_id"]))["status"] == "running"

    await sdk.alice.runs.cancel_many(thread_id=tid, run_ids=[queued["run_id"]])
    assert (await sdk.alice.runs.get(tid, queued["run_id"]))["status"] == "interrupted"
    await sdk.alice.runs.cancel_many(status="running")
    ended = await sdk.alice.runs.join(tid, running["run_id"])
    assert contents(ended)[-1] != "echo: later"
    assert (await sdk.alice.runs.get(tid, running["run_id"]))["status"] == "interrupted"

    streamed = await sdk.alice.runs.create(
        tid, "chatbot", input=said("streamed"), stream_mode=["values"]
    )
    parts = [part async for part in await sdk.alice.threads.join_stream(tid)]
    events = [p.event for p in parts]
    assert events[0] == "metadata" and events[-1] == "end"
    assert parts[0].data["run_id"] == streamed["run_id"]
    assert contents(parts[-2].data)[-1] == "echo: streamed"
    assert [p async for p in await sdk.alice.threads.join_stream(tid)] == []  # nothing runs
    with pytest.raises(NotFoundError):
        [p async for p in await sdk.bob.threads.join_stream(tid)]
    with pytest.raises(UnprocessableEntityError):
        [p async for p in await sdk.alice.threads.join_stream(tid, stream_mode="lifecycle")]
