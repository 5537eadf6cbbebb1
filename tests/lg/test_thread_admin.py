"""Threads and runs as a whole through the SDK: copy, count, prune, a thread's stream,
run delete and cancel_many; another user's are 404."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from tests.lg.conftest import Api, Clients

pytestmark = pytest.mark.asyncio(loop_scope="module")


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def contents(values: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in values.get("messages", [])]


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
