"""A request's progress over Server-Sent Events: `queued` with its place, `run_created`,
then exactly one `end`, with a real worker executing the runs.

The heartbeat is long here, so a stream that only advanced on its fallback re-read (a
missing notification) would miss the tests' deadlines instead of passing slowly."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.api.conftest import REQUEST_VIEW_KEYS, Api, Sse, error_of, parse_sse

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.usefixtures("worker")]

SSE_HEARTBEAT_SECONDS = 30.0
PROMPT = 5.0  # seconds: well inside one heartbeat


async def follow(api: Api, request_id: str, sink: list[Sse], who: str = "alice") -> None:
    """Appends the request's events to ``sink`` as they arrive, until the server closes."""
    path = f"/api/agent/requests/{request_id}/events"
    async with api.clients[who].stream("GET", path) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        assert response.headers["content-type"].startswith("text/event-stream")
        async for event in parse_sse(response.aiter_lines()):
            sink.append(event)


async def read_all(api: Api, request_id: str, within: float = 20.0) -> list[Sse]:
    events: list[Sse] = []
    async with asyncio.timeout(within):
        await follow(api, request_id, events)
    return events


def named(events: list[Sse]) -> list[tuple[str, Any]]:
    return [(e.event, e.json()) for e in events]


async def until(events: list[Sse], count: int, within: float = PROMPT) -> None:
    """Waits until ``events`` holds ``count`` events."""
    deadline = time.monotonic() + within
    while len(events) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(events)} of {count} events after {within}s: {events}")
        await asyncio.sleep(0.02)


async def test_a_request_queued_behind_a_run(api: Api) -> None:
    thread = await api.thread()
    ahead = await api.submit(thread, "/sleep 1")
    queued = await api.submit(thread, "behind the sleeper")
    assert (queued["status"], queued["queue_position"]) == ("queued", 1)

    events = await read_all(api, queued["request_id"])
    view = await api.request(queued["request_id"])
    assert named(events) == [
        ("queued", {"queue_position": 1}),
        ("run_created", {"run_id": view["run_id"]}),
        ("end", {"status": "completed", "run_id": view["run_id"]}),
    ]
    assert all(e.id is None for e in events)
    assert (await api.run(ahead["run_id"]))["status"] == "completed"
    assert (await api.result(view["run_id"]))["output"] == "echo: behind the sleeper"
    # run_created came when the sleeper ended, not a heartbeat later
    assert events[1].at - events[0].at < PROMPT


async def test_a_request_on_an_idle_thread(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "straight through")
    assert info["status"] == "dispatched"
    events = await read_all(api, info["request_id"], within=PROMPT * 2)
    assert named(events) == [
        ("run_created", {"run_id": info["run_id"]}),
        ("end", {"status": "completed", "run_id": info["run_id"]}),
    ]


async def test_a_finished_request_ends_at_once(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "done already")
    await api.completed(info["run_id"])
    opened = time.monotonic()
    events = await read_all(api, info["request_id"])
    assert time.monotonic() - opened < 2.0
    assert named(events) == [
        ("run_created", {"run_id": info["run_id"]}),
        ("end", {"status": "completed", "run_id": info["run_id"]}),
    ]
    # the same again: a stream reports the stored state, however often it is opened
    assert named(await read_all(api, info["request_id"])) == named(events)


async def test_a_failed_run_ends_the_request_failed_with_its_error(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "/fail on purpose")
    events = await read_all(api, info["request_id"])
    assert [e.event for e in events] == ["run_created", "end"]
    end = events[-1].json()
    assert end["status"] == "failed" and end["run_id"] == info["run_id"]
    assert end["error_type"] == "ScriptedModelError" and "on purpose" in end["error_message"]


async def test_cancelling_queued_requests_ends_them_and_moves_the_rest_up(api: Api) -> None:
    thread = await api.thread()
    ahead = await api.submit(thread, "/sleep 30")
    second = await api.submit(thread, "second")
    third = await api.submit(thread, "third")
    seconds: list[Sse] = []
    thirds: list[Sse] = []
    readers = [
        asyncio.create_task(follow(api, second["request_id"], seconds)),
        asyncio.create_task(follow(api, third["request_id"], thirds)),
    ]
    try:
        await until(seconds, 1)
        await until(thirds, 1)
        assert named(seconds) == [("queued", {"queue_position": 1})]
        assert named(thirds) == [("queued", {"queue_position": 2})]

        response = await api.alice.post(f"/api/agent/requests/{second['request_id']}/cancel")
        assert response.json()["status"] == "cancelled"
        await asyncio.wait_for(readers[0], PROMPT)
        assert named(seconds)[1:] == [("end", {"status": "cancelled", "run_id": None})]
        await until(thirds, 2)
        assert named(thirds)[1] == ("queued", {"queue_position": 1})

        await api.alice.post(f"/api/agent/requests/{third['request_id']}/cancel")
        await asyncio.wait_for(readers[1], PROMPT)
        assert named(thirds)[2:] == [("end", {"status": "cancelled", "run_id": None})]
    finally:
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        await api.alice.post(f"/api/agent/runs/{ahead['run_id']}/cancel")
    # a cancelled request's stream, opened afterwards, only ends
    assert named(await read_all(api, second["request_id"])) == [
        ("end", {"status": "cancelled", "run_id": None})
    ]


async def test_a_steered_request_moves_to_the_head(api: Api) -> None:
    thread = await api.thread()
    await api.submit(thread, "/sleep 3")
    second = await api.submit(thread, "second")
    third = await api.submit(thread, "third")
    events: list[Sse] = []
    reader = asyncio.create_task(follow(api, third["request_id"], events))
    try:
        await until(events, 1)
        response = await api.alice.post(f"/api/agent/requests/{third['request_id']}/steer")
        assert response.status_code == 200, response.text
        await until(events, 2)
        assert named(events) == [
            ("queued", {"queue_position": 2}),
            ("queued", {"queue_position": 1}),
        ]
        # the steered request runs as soon as the sleeper ends, before the second
        await asyncio.wait_for(reader, 20)
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
    view = await api.request(third["request_id"])
    assert [e.event for e in events] == ["queued", "queued", "run_created", "end"]
    assert events[-1].json() == {"status": "completed", "run_id": view["run_id"]}
    assert (await api.request(second["request_id"]))["status"] in ("queued", "dispatched")


async def test_continuing_a_paused_backlog_dispatches_the_waiting_request(api: Api) -> None:
    thread = await api.thread()
    ahead = await api.submit(thread, "/sleep 1")
    queued = await api.submit(thread, "after the pause")
    await api.alice.post(f"/api/agent/runs/{ahead['run_id']}/cancel")
    await api.wait_run(ahead["run_id"])
    assert (await api.queue(thread))["queue"]["status"] == "paused"

    events: list[Sse] = []
    reader = asyncio.create_task(follow(api, queued["request_id"], events))
    try:
        await until(events, 1)
        assert named(events) == [("queued", {"queue_position": 1})]
        response = await api.alice.post(f"/api/agent/thread/{thread}/requests/continue")
        assert response.status_code == 200, response.text
        await until(events, 2)
        await asyncio.wait_for(reader, 20)
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
    run_id = response.json()["run_id"]
    assert named(events)[1:] == [
        ("run_created", {"run_id": run_id}),
        ("end", {"status": "completed", "run_id": run_id}),
    ]


async def test_changes_made_from_psql_reach_the_stream_at_once(api: Api) -> None:
    """The notifications come from triggers, so an operator's psql is heard as promptly
    as the API: a steer, cancels, and the deletion of the thread."""
    thread = await api.thread()
    ahead = await api.submit(thread, "/sleep 30")
    second = await api.submit(thread, "second")
    third = await api.submit(thread, "third")
    fourth = await api.submit(thread, "fourth")
    seconds: list[Sse] = []
    fourths: list[Sse] = []
    readers = [
        asyncio.create_task(follow(api, second["request_id"], seconds)),
        asyncio.create_task(follow(api, fourth["request_id"], fourths)),
    ]
    try:
        await until(seconds, 1)
        await until(fourths, 1)
        assert named(fourths) == [("queued", {"queue_position": 3})]
        await api.sql("SELECT yuxi.request_steer(%s)", third["request_id"])
        await until(seconds, 2)  # the steered third went ahead of the second
        assert named(seconds) == [
            ("queued", {"queue_position": 1}),
            ("queued", {"queue_position": 2}),
        ]
        await api.sql("SELECT yuxi.request_cancel(%s)", second["request_id"])
        await asyncio.wait_for(readers[0], PROMPT)
        assert named(seconds)[2:] == [("end", {"status": "cancelled", "run_id": None})]
        await until(fourths, 2)
        await api.sql("SELECT yuxi.request_cancel(%s)", third["request_id"])
        await until(fourths, 3)
        assert named(fourths)[1:] == [
            ("queued", {"queue_position": 2}),
            ("queued", {"queue_position": 1}),
        ]
        await api.sql("SELECT yuxi.thread_delete(%s, %s)", api.uids["alice"], thread)
        await asyncio.wait_for(readers[1], PROMPT)
    finally:
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
    assert named(fourths)[3:] == [("end", {"status": "cancelled", "run_id": None})]
    status = await api.value(
        "SELECT status FROM yuxi.agent_runs WHERE run_id = %s", ahead["run_id"]
    )
    assert status in ("cancel_requested", "cancelled")


async def test_resuming_the_interrupted_run_ahead_is_heard_at_once(api: Api) -> None:
    """A request queued behind a run that then asks a question waits; the resume run that
    answers it is a new run, announced by a trigger, so the request's stream follows it
    and sees its own dispatch as soon as the resume run ends."""
    thread = await api.thread()
    await api.submit(thread, "/sleep 1")
    asking = await api.submit(thread, "/ask Colour?")
    waiting = await api.submit(thread, "after the answer")
    events: list[Sse] = []
    reader = asyncio.create_task(follow(api, waiting["request_id"], events))
    try:
        view = await api.wait_dispatched(asking["request_id"])
        assert (await api.wait_run(view["run_id"]))["status"] == "interrupted"
        await until(events, 2)
        assert named(events) == [
            ("queued", {"queue_position": 2}),
            ("queued", {"queue_position": 1}),
        ]
        response = await api.alice.post(
            f"/api/agent/runs/{view['run_id']}/resume", json={"resume": "blue"}
        )
        assert response.status_code == 202, response.text
        await asyncio.wait_for(reader, PROMPT * 2)
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
    dispatched = await api.request(waiting["request_id"])
    assert named(events)[2:] == [
        ("run_created", {"run_id": dispatched["run_id"]}),
        ("end", {"status": "completed", "run_id": dispatched["run_id"]}),
    ]


async def test_a_rejected_request_ends_at_once(api: Api) -> None:
    thread = await api.thread()
    ahead = await api.submit(thread, "/sleep 30")
    rejected = await api.submit(thread, "not now", queue_policy="reject")
    assert rejected["status"] == "rejected"
    try:
        events = await read_all(api, rejected["request_id"], within=PROMPT)
        assert named(events) == [("end", {"status": "rejected", "run_id": None})]
    finally:
        await api.alice.post(f"/api/agent/runs/{ahead['run_id']}/cancel")


async def test_an_interrupted_run_ends_the_request_interrupted(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "/ask Colour?")
    events = await read_all(api, info["request_id"])
    assert named(events)[-1] == ("end", {"status": "interrupted", "run_id": info["run_id"]})


async def test_another_users_or_an_unknown_request_is_404(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "alice's own")
    response = await api.bob.get(f"/api/agent/requests/{info['request_id']}/events")
    error_of(response, 404, "not_found")
    for request_id in ("no-such-request", "not a request id", "x" * 300):
        response = await api.alice.get(f"/api/agent/requests/{request_id}/events")
        error_of(response, 404, "not_found")
    error_of(await api.anon.get(f"/api/agent/requests/{info['request_id']}/events"), 401)


async def test_the_request_view_is_unchanged_and_the_stream_is_in_the_schema(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "view")
    assert set(info) == REQUEST_VIEW_KEYS
    assert set(await api.request(info["request_id"])) == REQUEST_VIEW_KEYS
    schema = (await api.anon.get("/schema/openapi.json")).json()
    assert "get" in schema["paths"]["/api/agent/requests/{request_id}/events"]
