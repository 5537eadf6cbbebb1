"""Runs through the official LangGraph SDK against a real server and worker."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError
from langgraph_sdk.schema import RunCreateMetadata

from tests.lg.conftest import Api, Clients

pytestmark = pytest.mark.asyncio(loop_scope="module")


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def last_text(values: dict[str, Any]) -> str:
    return str(values["messages"][-1]["content"])


async def test_background_run_then_join(sdk: Clients, worker: None) -> None:
    thread = await sdk.alice.threads.create()
    run = await sdk.alice.runs.create(thread["thread_id"], "chatbot", input=said("hello"))
    assert run["status"] in ("pending", "running")
    assert run["assistant_id"] == "chatbot"
    values = await sdk.alice.runs.join(thread["thread_id"], run["run_id"])
    assert last_text(values) == "echo: hello"
    done = await sdk.alice.runs.get(thread["thread_id"], run["run_id"])
    assert done["status"] == "success"
    listed = await sdk.alice.runs.list(thread["thread_id"])
    assert [r["run_id"] for r in listed] == [run["run_id"]]
    got = await sdk.alice.threads.get(thread["thread_id"])
    assert got["metadata"]["graph_id"] == "chatbot" and got["status"] == "idle"
    assert last_text(got["values"]) == "echo: hello"
    state = await sdk.alice.threads.get_state(thread["thread_id"])
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai"]
    history = await sdk.alice.threads.get_history(thread["thread_id"], limit=3)
    assert history and history[0]["checkpoint"] == state["checkpoint"]


async def test_wait_answers_the_final_values(sdk: Clients, worker: None) -> None:
    thread = await sdk.alice.threads.create()
    values = await sdk.alice.runs.wait(thread["thread_id"], "chatbot", input=said("one"))
    assert last_text(values) == "echo: one"
    values = await sdk.alice.runs.wait(thread["thread_id"], "chatbot", input=said("two"))
    assert [m["content"] for m in values["messages"]] == ["one", "echo: one", "two", "echo: two"]


@pytest.mark.parametrize("mode", ["values", "updates", "messages-tuple", "messages"])
async def test_stream_modes_with_on_run_created(sdk: Clients, worker: None, mode: str) -> None:
    thread = await sdk.alice.threads.create()
    created: list[RunCreateMetadata] = []
    parts = [
        part
        async for part in sdk.alice.runs.stream(
            thread["thread_id"],
            "chatbot",
            input=said("hello there"),
            stream_mode=mode,
            on_run_created=created.append,
        )
    ]
    assert len(created) == 1 and created[0]["thread_id"] == thread["thread_id"]
    events = [p.event for p in parts]
    assert events[0] == "metadata" and events[-1] == "end"
    assert parts[0].data["run_id"] == created[0]["run_id"]
    if mode == "values":
        assert last_text(parts[-2].data) == "echo: hello there"
        assert parts[1].data["messages"][-1]["content"] == "hello there"
    elif mode == "updates":
        assert parts[-2].data["model"]["messages"][0]["content"] == "echo: hello there"
    elif mode == "messages":
        partial = [p.data for p in parts if p.event == "messages/partial"]
        assert partial[-1][0]["content"] == "echo: hello there"
        assert [p.event for p in parts].count("messages/metadata") == 1
        complete = [p.data for p in parts if p.event == "messages/complete"]
        assert complete[0][0]["id"] == partial[0][0]["id"]
    else:
        chunks = [p.data for p in parts if p.event == "messages"]
        assert "".join(c[0]["content"] for c in chunks) == "echo: hello there"
        assert len({c[0]["id"] for c in chunks}) == 1
        assert chunks[0][1]["langgraph_node"] == "model"


async def test_v2_stream_parts(sdk: Clients, worker: None) -> None:
    thread = await sdk.alice.threads.create()
    parts = [
        part
        async for part in sdk.alice.runs.stream(
            thread["thread_id"],
            "chatbot",
            input=said("v2"),
            stream_mode=["updates", "values"],
            version="v2",
        )
    ]
    types = [p["type"] for p in parts]
    assert types[0] == "metadata" and "end" not in types
    assert {"updates", "values"} <= set(types)
    assert all(p["ns"] == [] for p in parts)
    final = [p for p in parts if p["type"] == "values"][-1]
    assert last_text(final["data"]) == "echo: v2" and final["interrupts"] == []


async def test_a_dropped_stream_resumes_from_its_last_event_id(sdk: Clients, worker: None) -> None:
    thread = await sdk.alice.threads.create()
    modes = ["values", "updates", "messages-tuple"]
    run = await sdk.alice.runs.create(
        thread["thread_id"],
        "chatbot",
        input=said('/tool calculator {"expression": "6*7"}'),
        stream_mode=modes,
    )
    await sdk.alice.runs.join(thread["thread_id"], run["run_id"])
    full = [
        (p.event, p.data)
        async for p in sdk.alice.runs.join_stream(thread["thread_id"], run["run_id"])
    ]
    assert full[0][0] == "metadata" and full[-1][0] == "end"
    # drop after the second event that carried an id, then re-join from that id
    seen: list[tuple[str, Any]] = []
    last_id = None
    ids = 0
    async for part in sdk.alice.runs.join_stream(thread["thread_id"], run["run_id"]):
        seen.append((part.event, part.data))
        if part.id != last_id:
            last_id, ids = part.id, ids + 1
            if ids == 3:
                break
    assert last_id is not None
    rest = [
        (p.event, p.data)
        async for p in sdk.alice.runs.join_stream(
            thread["thread_id"], run["run_id"], last_event_id=last_id
        )
    ]
    assert seen + rest == full


async def test_enqueued_runs_complete_in_order(sdk: Clients, api: Api, worker: None) -> None:
    thread = await sdk.alice.threads.create()
    runs = [
        await sdk.alice.runs.create(
            thread["thread_id"], "chatbot", input=said("/sleep 1"), multitask_strategy="enqueue"
        )
        for _ in range(3)
    ]
    for run in runs:
        await sdk.alice.runs.join(thread["thread_id"], run["run_id"])
    rows = await api.sql(
        "SELECT r.request_id, ar.started_at, ar.finished_at, ar.status"
        " FROM yuxi.agent_run_requests r JOIN yuxi.agent_runs ar ON ar.run_id = r.dispatched_run_id"
        " WHERE r.thread_id = %s ORDER BY ar.started_at",
        thread["thread_id"],
    )
    assert [r[0] for r in rows] == [run["run_id"] for run in runs]
    assert all(r[3] == "completed" for r in rows)
    assert rows[0][2] <= rows[1][1] and rows[1][2] <= rows[2][1]


async def test_reject_while_running_is_a_conflict_with_nothing_listed(
    sdk: Clients, worker: None
) -> None:
    thread = await sdk.alice.threads.create()
    first = await sdk.alice.runs.create(thread["thread_id"], "chatbot", input=said("/sleep 1"))
    with pytest.raises(ConflictError):
        await sdk.alice.runs.create(
            thread["thread_id"], "chatbot", input=said("no"), multitask_strategy="reject"
        )
    assert [r["run_id"] for r in await sdk.alice.runs.list(thread["thread_id"])] == [
        first["run_id"]
    ]
    await sdk.alice.runs.join(thread["thread_id"], first["run_id"])


async def test_interrupt_cancels_the_active_run_and_runs_the_new_input_next(
    sdk: Clients, api: Api, worker: None
) -> None:
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    first = await sdk.alice.runs.create(tid, "chatbot", input=said("/sleep 30"))
    queued = await sdk.alice.runs.create(tid, "chatbot", input=said("behind"))
    for _ in range(200):
        if (await sdk.alice.runs.get(tid, first["run_id"]))["status"] == "running":
            break
        await asyncio.sleep(0.05)
    second = await sdk.alice.runs.create(
        tid, "chatbot", input=said("instead"), multitask_strategy="interrupt"
    )
    values = await sdk.alice.runs.join(tid, second["run_id"])
    assert last_text(values) == "echo: instead"
    assert (await sdk.alice.runs.get(tid, first["run_id"]))["status"] == "interrupted"
    values = await sdk.alice.runs.join(tid, queued["run_id"])
    assert last_text(values) == "echo: behind"
    order = await api.sql(
        "SELECT request_id FROM yuxi.agent_runs WHERE thread_id = %s ORDER BY created_at", tid
    )
    assert [r[0] for r in order] == [first["run_id"], second["run_id"], queued["run_id"]]


async def test_ask_interrupts_and_command_resume_answers(sdk: Clients, worker: None) -> None:
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    values = await sdk.alice.runs.wait(tid, "chatbot", input=said("/ask what colour?"))
    interrupt = values["__interrupt__"][0]
    assert interrupt["value"]["question"] == "what colour?"
    assert interrupt["value"]["action_requests"][0]["name"] == "ask_user"
    got = await sdk.alice.threads.get(tid)
    assert got["status"] == "interrupted" and got["interrupts"]
    values = await sdk.alice.runs.wait(tid, "chatbot", command={"resume": "blue"})
    assert last_text(values) == "you answered: blue"
    assert (await sdk.alice.threads.get(tid))["status"] == "idle"


async def test_tool_approval_by_decisions(sdk: Clients, worker: None) -> None:
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    ask = {"tool_approval_mode": "ask"}
    values = await sdk.alice.runs.wait(
        tid, "chatbot", input=said('/tool calculator {"expression": "6*7"}'), context=ask
    )
    request = values["__interrupt__"][0]["value"]
    assert request["action_requests"][0]["name"] == "calculator"
    assert request["review_configs"][0]["allowed_decisions"] == ["approve", "reject"]
    with pytest.raises(httpx.HTTPStatusError) as refused:  # wait raises httpx's own
        await sdk.alice.runs.wait(
            tid, "chatbot", command={"resume": {"decisions": [{"type": "edit"}]}}
        )
    assert refused.value.response.status_code == 422
    values = await sdk.alice.runs.wait(
        tid, "chatbot", command={"resume": {"decisions": [{"type": "approve"}]}}
    )
    assert last_text(values) == "tool calculator returned: 42"


@pytest.mark.parametrize(
    "body",
    [
        {"interrupt_before": ["tools"]},
        {"interrupt_after": "*"},
        {"after_seconds": 5},
        {"multitask_strategy": "rollback"},
        {"context": {"no_such_key": 1}},
        {"context": {"system_prompt": "be terse"}},
        {"command": {"goto": "model"}},
        {"stream_mode": "no_such_mode"},
    ],
)
async def test_refused_features_are_422(sdk: Clients, body: dict[str, Any]) -> None:
    thread = await sdk.alice.threads.create()
    fields: dict[str, Any] = {"input": said("hi")} | body
    if "command" in body:
        fields.pop("input")
    with pytest.raises(UnprocessableEntityError):
        await sdk.alice.runs.create(thread["thread_id"], "chatbot", **fields)
    assert await sdk.alice.runs.list(thread["thread_id"]) == []


async def test_another_users_thread_is_not_found_on_every_route(sdk: Clients, worker: None) -> None:
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    run = await sdk.alice.runs.create(tid, "chatbot", input=said("mine"))
    await sdk.alice.runs.join(tid, run["run_id"])
    bob = sdk.bob
    rid = run["run_id"]
    attempts: list[Callable[[], Awaitable[Any]]] = [
        lambda: bob.threads.get(tid),
        lambda: bob.threads.update(tid, metadata={"x": 1}),
        lambda: bob.threads.delete(tid),
        lambda: bob.threads.get_state(tid),
        lambda: bob.threads.get_history(tid),
        lambda: bob.runs.create(tid, "chatbot", input=said("x")),
        lambda: bob.runs.wait(tid, "chatbot", input=said("x")),
        lambda: bob.runs.list(tid),
        lambda: bob.runs.get(tid, rid),
        lambda: bob.runs.join(tid, rid),
        lambda: bob.runs.cancel(tid, rid),
    ]
    for attempt in attempts:
        # wait and join raise httpx's own error, the others the SDK's NotFoundError
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await attempt()
        assert refused.value.response.status_code == 404
    with pytest.raises(NotFoundError):
        async for _ in bob.runs.join_stream(tid, rid):
            pass
    with pytest.raises(NotFoundError):
        async for _ in bob.runs.stream(tid, "chatbot", input=said("x")):
            pass
    assert tid not in {t["thread_id"] for t in await bob.threads.search()}
    assert (await sdk.alice.threads.get(tid))["thread_id"] == tid


async def test_more_joins_than_pooled_connections_hold_none(
    sdk: Clients, api: Api, worker: None
) -> None:
    # a join waits for its run's end without a pooled connection: more joins than the
    # pool has connections all end
    count = api.settings.pool_max_size + 5
    threads = [await sdk.alice.threads.create() for _ in range(count)]
    runs = [
        await sdk.alice.runs.create(t["thread_id"], "chatbot", input=said("/sleep 2"))
        for t in threads
    ]
    ended = await asyncio.gather(
        *(
            sdk.alice.runs.join(t["thread_id"], r["run_id"])
            for t, r in zip(threads, runs, strict=True)
        )
    )
    # 8 at a time in the worker: the last joins wait longer than the pool's timeout (5 s)
    assert [last_text(v) for v in ended] == ["slept 2"] * count


async def test_a_failed_run_streams_an_error_and_wait_raises(sdk: Clients, worker: None) -> None:
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    parts = [p async for p in sdk.alice.runs.stream(tid, "chatbot", input=said("/fail boom"))]
    errors = [p.data for p in parts if p.event == "error"]
    assert errors and errors[0]["message"] and "boom" in errors[0]["message"]
    assert (await sdk.alice.runs.list(tid))[0]["status"] == "error"
    assert (await sdk.alice.threads.get(tid))["status"] == "error"
    with pytest.raises(Exception, match="boom"):
        await sdk.alice.runs.wait(tid, "chatbot", input=said("/fail boom"))


async def test_cancel_a_running_and_a_queued_run(sdk: Clients, worker: None) -> None:
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    running = await sdk.alice.runs.create(tid, "chatbot", input=said("/sleep 30"))
    queued = await sdk.alice.runs.create(tid, "chatbot", input=said("later"))
    assert (await sdk.alice.runs.get(tid, queued["run_id"]))["status"] == "pending"
    await sdk.alice.runs.cancel(tid, queued["run_id"])
    assert (await sdk.alice.runs.get(tid, queued["run_id"]))["status"] == "interrupted"
    for _ in range(200):
        if (await sdk.alice.runs.get(tid, running["run_id"]))["status"] == "running":
            break
        await asyncio.sleep(0.05)
    cancelled = await sdk.alice.runs.cancel(tid, running["run_id"], wait=True)
    assert cancelled["status"] == "interrupted"
    # the backlog is empty, so nothing is paused: the next run runs
    values = await sdk.alice.runs.wait(tid, "chatbot", input=said("after"))
    assert last_text(values) == "echo: after"


async def test_state_history_and_filters_of_an_interrupted_thread(
    sdk: Clients, worker: None
) -> None:
    thread = await sdk.alice.threads.create(metadata={"case": "filters"})
    tid = thread["thread_id"]
    await sdk.alice.runs.wait(tid, "chatbot", input=said("hi"))
    await sdk.alice.runs.wait(tid, "chatbot", input=said("/ask why?"))
    state = await sdk.alice.threads.get_state(tid)
    assert state["next"] == ["tools"]
    assert state["tasks"][0]["interrupts"][0]["value"]["question"] == "why?"
    assert state["interrupts"] == state["tasks"][0]["interrupts"]
    history = await sdk.alice.threads.get_history(tid, limit=100)
    assert history[0]["checkpoint"] == state["checkpoint"]
    assert all(h["interrupts"] == [] for h in history[1:])
    older = await sdk.alice.threads.get_history(tid, limit=2, before=history[0]["checkpoint"])
    assert [h["checkpoint"] for h in older] == [h["checkpoint"] for h in history[1:3]]
    found = await sdk.alice.threads.search(metadata={"case": "filters"}, status="interrupted")
    assert [t["thread_id"] for t in found] == [tid]
    assert await sdk.alice.threads.search(metadata={"case": "filters"}, status="busy") == []
    assert len(await sdk.alice.runs.list(tid, status="success")) == 2
    assert await sdk.alice.runs.list(tid, status="error") == []
