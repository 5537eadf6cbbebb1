"""Run events over Server-Sent Events: ids are seqs, resumable, exactly one `end`."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from tests.api.conftest import Api, Sse, assert_init, parse_sse, read_sse

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.usefixtures("worker")]

# short, so that a stream stalled by a lost notification (test_sse_race.py) shows as a
# test a little slower rather than one 15 s slower
SSE_HEARTBEAT_SECONDS = 2.0


async def stored(api: Api, run_id: str) -> list[tuple[int, str, Any]]:
    rows = await api.sql(
        "SELECT seq, event, payload FROM yuxi.run_events WHERE run_id = %s ORDER BY seq", run_id
    )
    return [(int(seq), event, payload) for seq, event, payload in rows]


def as_rows(events: list[Sse]) -> list[tuple[int, str, Any]]:
    return [(e.seq, e.event, e.json()) for e in events]


def assert_live_stream_matches(events: list[Sse], rows: list[tuple[int, str, Any]]) -> None:
    """A stream read while the run went on is the stored log exactly: no event skipped,
    the stored `end` (not a stand-in), no heartbeat events (test_sse_race.py)."""
    assert as_rows(events) == rows


async def finished_run(api: Api, query: str) -> tuple[str, list[tuple[int, str, Any]]]:
    thread = await api.thread()
    info = await api.submit(thread, query)
    await api.wait_run(info["run_id"])
    return info["run_id"], await stored(api, info["run_id"])


async def test_a_full_stream(api: Api) -> None:
    run_id, rows = await finished_run(api, "stream these words please")
    events = await read_sse(api.alice, run_id)
    assert as_rows(events) == rows
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    names = [e.event for e in events]
    assert names[0] == "metadata" and names.count("end") == 1 and names[-1] == "end"
    end = events[-1].json()
    assert end["status"] == "completed" and isinstance(end["output_message_id"], int)
    text = "".join(c["text"] for e in events if e.event == "messages" for c in e.json()["chunks"])
    assert text == "echo: stream these words please"


async def test_resuming_yields_exactly_the_rest(api: Api) -> None:
    run_id, rows = await finished_run(api, '/tool calculator {"expression": "1+1"}')
    assert len(rows) >= 4
    last = rows[-1][0]
    for position in range(last):
        by_header = await read_sse(api.alice, run_id, headers={"Last-Event-ID": str(position)})
        assert as_rows(by_header) == rows[position:], position
        by_query = await read_sse(api.alice, run_id, params={"after_seq": position})
        assert as_rows(by_query) == rows[position:], position
        for events in (by_header, by_query):
            assert [e.event for e in events].count("end") == 1


@pytest.mark.parametrize("beyond", [0, 1, 1000])
async def test_resuming_at_or_past_the_end_yields_one_end(api: Api, beyond: int) -> None:
    run_id, rows = await finished_run(api, "short")
    last = rows[-1][0]
    for kwargs in (
        {"headers": {"Last-Event-ID": str(last + beyond)}},
        {"params": {"after_seq": last + beyond}},
    ):
        events = await read_sse(api.alice, run_id, **kwargs)  # type: ignore[arg-type]
        assert [e.event for e in events] == ["end"], kwargs
        assert events[0].json()["status"] == "completed"
        assert events[0].seq >= last


async def test_a_failed_run_streams_its_error_then_end(api: Api) -> None:
    run_id, rows = await finished_run(api, "/fail stream failure")
    events = await read_sse(api.alice, run_id)
    assert as_rows(events) == rows
    assert [e.event for e in events][-2:] == ["error", "end"]
    assert events[-2].json() == {"error_type": "ScriptedModelError", "message": "stream failure"}
    end = events[-1].json()
    assert end["status"] == "failed" and end["error_type"] == "ScriptedModelError"


async def test_an_interrupted_run_and_its_resume_each_end_once(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "/ask Colour?")
    await api.wait_run(info["run_id"])
    events = await read_sse(api.alice, info["run_id"])
    assert [e.event for e in events][-2:] == ["interrupt", "end"]
    assert events[-1].json()["status"] == "interrupted"
    resumed = (
        await api.alice.post(f"/api/agent/runs/{info['run_id']}/resume", json={"resume": "blue"})
    ).json()
    events = await read_sse(api.alice, resumed["run_id"], within=20)
    assert [e.event for e in events].count("end") == 1
    assert events[-1].json()["status"] == "completed"
    # the interrupted run's stream is unchanged by the resume
    assert [e.event for e in await read_sse(api.alice, info["run_id"])].count("end") == 1


async def test_a_live_stream_receives_events_as_they_are_written(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "/sleep 1")
    opened = time.monotonic()
    events: list[Sse] = []
    statuses_seen: list[str] = []
    async with asyncio.timeout(15):
        async with api.alice.stream("GET", info["stream_url"]) as response:
            assert response.status_code == 200
            events_and_init = parse_sse(response.aiter_lines())
            assert_init(await anext(events_and_init), info["run_id"])
            async for event in events_and_init:
                events.append(event)
                if len(events) == 1:
                    # the first event arrives while the run is still going
                    statuses_seen.append((await api.run(info["run_id"]))["status"])
    assert statuses_seen == ["running"]
    assert events[0].event == "metadata" and events[-1].event == "end"
    assert [e.event for e in events].count("end") == 1
    # metadata came at the start of the run, the end after the model's 1 s sleep
    assert events[-1].at - events[0].at >= 0.8
    assert events[0].at - opened < 1.0
    assert_live_stream_matches(events, await stored(api, info["run_id"]))


async def test_reconnecting_mid_run_with_last_event_id(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "/sleep 1")
    first: Sse | None = None
    async with asyncio.timeout(15):
        async with api.alice.stream("GET", info["stream_url"]) as response:
            events = parse_sse(response.aiter_lines())
            assert_init(await anext(events), info["run_id"])
            async for event in events:
                first = event
                break  # the client goes away after one event
    assert first is not None and (first.seq, first.event) == (1, "metadata")
    rest = await read_sse(api.alice, info["run_id"], headers={"Last-Event-ID": first.id or ""})
    rows = await stored(api, info["run_id"])
    assert_live_stream_matches([first, *rest], rows)
    assert [e.event for e in rest].count("end") == 1


async def test_concurrent_streams_see_the_same_events(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "/sleep 0.5")
    streams = await asyncio.gather(*(read_sse(api.alice, info["run_id"]) for _ in range(5)))
    rows = await stored(api, info["run_id"])
    for events in streams:
        assert_live_stream_matches(events, rows)


async def test_a_cancelled_running_run_streams_one_end(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "/sleep 30")
    reader = asyncio.create_task(read_sse(api.alice, info["run_id"]))
    await api.wait_run(info["run_id"], {"running"})
    await api.alice.post(f"/api/agent/runs/{info['run_id']}/cancel")
    events = await asyncio.wait_for(reader, 10)
    assert [e.event for e in events].count("end") == 1
    assert events[-1].json()["status"] == "cancelled"
    assert json.loads(events[-1].data)["status"] == "cancelled"


async def test_a_fresh_stream_starts_with_the_stored_input(api: Api) -> None:
    """``init`` (id 0) echoes what was saved before anything streams: the user message
    of a chat run, the answer of a resume run; a resumed stream does not repeat it."""
    thread = await api.thread()
    info = await api.submit(thread, "/ask your name?")
    await api.wait_run(info["run_id"])
    async with api.alice.stream("GET", info["stream_url"]) as response:
        init = await anext(parse_sse(response.aiter_lines()))
    assert (init.event, init.id) == ("init", "0")
    assert init.json() == {
        "run_id": info["run_id"],
        "thread_id": thread,
        "request_id": info["request_id"],
        "run_type": "chat",
        "message_id": info["message_id"],
        "query": "/ask your name?",
        "input": {"model_spec": "builtin:scripted", "tool_approval_mode": "auto"},
    }
    resumed = (
        await api.alice.post(f"/api/agent/runs/{info['run_id']}/resume", json={"resume": "Ada"})
    ).json()
    async with api.alice.stream("GET", resumed["stream_url"]) as response:
        init = await anext(parse_sse(response.aiter_lines()))
    body = init.json()
    assert (body["run_type"], body["message_id"], body["query"]) == ("resume", None, None)
    assert body["input"]["resume"] == "Ada"
    # resuming from a seq (or Last-Event-ID 0, after init) does not send it again
    for kwargs in ({"params": {"after_seq": 0}}, {"headers": {"Last-Event-ID": "0"}}):
        async with api.alice.stream("GET", info["stream_url"], **kwargs) as response:
            first = await anext(parse_sse(response.aiter_lines()))
        assert first.event != "init" and first.seq == 1, kwargs
