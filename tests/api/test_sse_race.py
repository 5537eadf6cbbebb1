"""The SSE loop against writes that land between its reads, made deterministic.

No worker here: the test plays the worker through the same SQL functions (claim, append,
finish). The server runs in this process, so a test can hold a stream at one point of its
loop (right after a read that found no new events, before it waits for news) while the
"worker" commits: the window in which a real worker's commit may land at any time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import pytest

from tests.api.conftest import Api, Sse, collect_sse, parse_sse, read_sse
from yuxi.queue.events import run_stream_read

pytestmark = pytest.mark.asyncio(loop_scope="module")

# the server's re-read interval in this module (read by the `api` fixture)
SSE_HEARTBEAT_SECONDS = 1.5


def patch_stream_read(monkeypatch: pytest.MonkeyPatch, replacement: Any) -> None:
    """``replacement`` for run_stream_read wherever the API calls it from (the streams'
    loop, yuxi.api.run_stream, or any module that imports it)."""
    for name, module in list(sys.modules.items()):
        if name.startswith("yuxi.api") and getattr(module, "run_stream_read", None) is (
            run_stream_read
        ):
            monkeypatch.setattr(module, "run_stream_read", replacement)


@dataclass
class Gate:
    """Holds the first read of one run's stream that found no new events until released."""

    run_id: UUID
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture
def gate_events_after(monkeypatch: pytest.MonkeyPatch) -> Any:
    original = run_stream_read

    def arm(run_id: str) -> Gate:
        gate = Gate(UUID(run_id))

        async def stream_read(conn: Any, run: UUID, after: int, limit: int = 1000) -> Any:
            rows = await original(conn, run, after, limit)
            found_none = bool(rows) and rows[0].seq is None
            if run == gate.run_id and found_none and not gate.reached.is_set():
                gate.reached.set()
                await gate.release.wait()
            return rows

        patch_stream_read(monkeypatch, stream_read)
        return gate

    return arm


async def claimed_run(api: Api) -> tuple[str, str]:
    thread = await api.thread()
    info = await api.submit(thread, "played by the test")
    token = await api.value(
        "SELECT lease_token FROM yuxi.run_claim(%s, 'test-worker', 60)", info["run_id"]
    )
    return info["run_id"], str(token)


async def append(api: Api, run_id: str, token: str, text: str) -> None:
    await api.sql(
        "SELECT yuxi.run_append_events(%s, %s, %s::jsonb)",
        run_id,
        token,
        json.dumps([{"event": "messages", "payload": {"chunks": [{"text": text}]}}]),
    )


async def finish(api: Api, run_id: str, token: str) -> None:
    await api.sql(
        "SELECT yuxi.run_finish(%s, %s, 'completed', %s::jsonb)",
        run_id,
        token,
        json.dumps([{"role": "assistant", "content": "done"}]),
    )


async def wait_for_event(seen: list[Sse], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not without_heartbeats(seen):
        assert time.monotonic() < deadline, "no event arrived"
        await asyncio.sleep(0.01)


def without_heartbeats(events: list[Sse]) -> list[Sse]:
    # should there be any: see test_heartbeats_are_comments_not_events
    return [e for e in events if e.event != "message"]


async def stored_end(api: Api, run_id: str) -> object:
    return await api.value(
        "SELECT payload FROM yuxi.run_events WHERE run_id = %s AND event = 'end'", run_id
    )


async def test_a_waiting_stream_is_woken_by_new_events(api: Api) -> None:
    """The normal path, for contrast: append + notify wakes a waiting stream at once."""
    run_id, token = await claimed_run(api)
    reader = asyncio.create_task(read_sse(api.alice, run_id, within=30))
    await asyncio.sleep(0.3)  # the stream has found nothing and waits for news
    await append(api, run_id, token, "hi")
    await finish(api, run_id, token)
    finished = time.monotonic()
    events = without_heartbeats(await reader)
    assert [(e.seq, e.event) for e in events] == [(1, "messages"), (2, "end")]
    assert events[-1].json() == await stored_end(api, run_id)
    assert events[-1].at - finished < SSE_HEARTBEAT_SECONDS / 2


async def test_events_committed_between_the_streams_reads_are_sent(
    api: Api, gate_events_after: Any
) -> None:
    """Once failed: a read that found no events was followed by a read of the run, and a
    run that had appended events and finished in between got a stand-in `end` (without
    output_message_id) while the events in between were never sent."""
    run_id, token = await claimed_run(api)
    gate = gate_events_after(run_id)
    reader = asyncio.create_task(read_sse(api.alice, run_id, within=30))
    await asyncio.wait_for(gate.reached.wait(), 10)  # read: nothing yet
    await append(api, run_id, token, "hi")
    await finish(api, run_id, token)
    gate.release.set()  # now the stream reads the run
    events = without_heartbeats(await reader)
    assert [(e.seq, e.event) for e in events] == [(1, "messages"), (2, "end")]
    assert events[-1].json() == await stored_end(api, run_id)


async def test_a_notification_during_the_streams_reads_is_not_lost(
    api: Api, gate_events_after: Any
) -> None:
    """Once failed: the stream subscribed to notifications only after its reads, so news
    that landed during them waited for the next heartbeat (15 s by default)."""
    run_id, token = await claimed_run(api)
    gate = gate_events_after(run_id)
    seen: list[Sse] = []
    reader = asyncio.create_task(collect_sse(api.alice, run_id, seen))
    await asyncio.wait_for(gate.reached.wait(), 10)  # read: nothing yet
    await append(api, run_id, token, "hi")  # committed, then notified
    appended = time.monotonic()
    await asyncio.sleep(0.2)  # the API process has the notification
    gate.release.set()
    await wait_for_event(seen)
    await finish(api, run_id, token)
    await asyncio.wait_for(reader, 10)
    first = without_heartbeats(seen)[0]
    assert first.event == "messages"
    assert first.at - appended < SSE_HEARTBEAT_SECONDS / 2, (
        f"the event arrived {first.at - appended:.1f}s after it was committed"
    )


async def test_heartbeats_are_comments_not_events(api: Api) -> None:
    """Once failed: litestar encoded the heartbeat comment with an empty `data:` line,
    an empty `message` event for EventSource clients."""
    run_id, _ = await claimed_run(api)
    seen: list[Sse] = []
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(SSE_HEARTBEAT_SECONDS * 1.7):
            async with api.alice.stream("GET", f"/api/agent/runs/{run_id}/events") as response:
                async for event in parse_sse(response.aiter_lines()):
                    seen.append(event)
    # nothing happened to the run: a client sees no event but the stored input
    assert [e.event for e in seen] == ["init"]


@pytest.fixture
def count_stream_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The seqs after which the streams read the run's events (run_stream_read), in order."""
    original = run_stream_read
    reads: list[int] = []

    async def stream_read(conn: Any, run: UUID, after: int, limit: int = 1000) -> Any:
        reads.append(after)
        return await original(conn, run, after, limit)

    patch_stream_read(monkeypatch, stream_read)
    return reads


async def append_quietly(api: Api, run_id: str, token: str, texts: list[str]) -> int:
    """Appends as the worker does (no NOTIFY in the transaction); returns the last seq."""
    events = [{"event": "messages", "payload": {"chunks": [{"text": t}]}} for t in texts]
    return int(
        await api.value(
            "SELECT yuxi.run_append_events(%s, %s, %s::jsonb, p_notify => false)",
            run_id,
            token,
            json.dumps(events),
        )
    )


async def announce(api: Api, run_id: str, last: int, first: int | None) -> None:
    await api.sql("SELECT yuxi.run_events_announce(%s, %s, %s)", run_id, last, first)


async def test_events_a_notification_carries_are_sent_without_a_read(
    api: Api, count_stream_reads: list[int]
) -> None:
    """The worker's notification after commit carries its events: a stream that has sent
    everything before them sends them as they came, and reads nothing."""
    run_id, token = await claimed_run(api)
    seen: list[Sse] = []
    reader = asyncio.create_task(collect_sse(api.alice, run_id, seen))
    await asyncio.sleep(0.3)  # opened (its first read: the init event), now it waits
    last = await append_quietly(api, run_id, token, ["one", "two"])
    await announce(api, run_id, last, last - 1)
    await wait_for_event(seen)
    await api.sql(
        "SELECT yuxi.run_finish(%s, %s, 'completed', %s::jsonb, p_notify => false)",
        run_id,
        token,
        json.dumps([{"role": "assistant", "content": "done"}]),
    )
    await announce(api, run_id, last + 1, last + 1)
    await asyncio.wait_for(reader, 10)
    events = without_heartbeats(seen)
    rows = await api.sql(
        "SELECT seq, event, payload::text FROM yuxi.run_events WHERE run_id = %s ORDER BY seq",
        run_id,
    )
    # the payloads as stored, to the byte (JSON text as yuxi.run_stream_read gives it)
    assert [(e.seq, e.event, e.data) for e in events] == [tuple(r) for r in rows]
    assert [e.event for e in events] == ["messages", "messages", "end"]
    assert count_stream_reads == []  # the stream's only read was its first


async def test_a_notification_that_skips_events_makes_the_stream_read(
    api: Api, count_stream_reads: list[int]
) -> None:
    """A notification carrying only the newest events (the older ones did not fit, or
    came without a notification) is no gap in the stream: it reads what it has not sent."""
    run_id, token = await claimed_run(api)
    seen: list[Sse] = []
    reader = asyncio.create_task(collect_sse(api.alice, run_id, seen))
    await asyncio.sleep(0.3)
    last = await append_quietly(api, run_id, token, ["one", "two", "three"])
    await announce(api, run_id, last, last)  # carries seq 3 only
    await wait_for_event(seen)
    await announce(api, run_id, last, None)  # bare, and nothing the stream has not sent
    await finish(api, run_id, token)
    await asyncio.wait_for(reader, 10)
    events = without_heartbeats(seen)
    assert [(e.seq, e.event) for e in events] == [
        (1, "messages"),
        (2, "messages"),
        (3, "messages"),
        (4, "end"),
    ]
    assert [e.json()["chunks"][0]["text"] for e in events[:3]] == ["one", "two", "three"]
    # one read for the gap; the bare notification of seq 3 needed none; the end was
    # notified in its transaction without events, so it was read
    assert count_stream_reads == [0, 3]


async def finish_quietly(api: Api, run_id: str, token: str) -> None:
    await api.sql(
        "SELECT yuxi.run_finish(%s, %s, 'completed', %s::jsonb, p_notify => false)",
        run_id,
        token,
        json.dumps([{"role": "assistant", "content": "done"}]),
    )


async def collect_lg(api: Api, thread_id: str, request_id: str, sink: list[Sse]) -> None:
    """Appends the parts of an /lg run's stream (join_stream) to ``sink`` until its end."""
    url = f"{api.settings.lg_prefix}/threads/{thread_id}/runs/{request_id}/stream"
    async with api.alice.stream("GET", url) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        async for event in parse_sse(response.aiter_lines()):
            sink.append(event)


async def test_an_lg_stream_sends_carried_events_without_a_read(
    api: Api, count_stream_reads: list[int]
) -> None:
    """/lg follows a run with the native stream's loop: the events a notification
    carries are translated and sent as they came, and the table is read only once."""
    prefix = api.settings.lg_prefix
    thread = (await api.alice.post(f"{prefix}/threads", json={})).json()["thread_id"]
    created = await api.alice.post(
        f"{prefix}/threads/{thread}/runs",
        json={
            "assistant_id": "chatbot",
            "input": {"messages": [{"role": "user", "content": "played by the test"}]},
            "stream_mode": ["messages-tuple", "updates"],
        },
    )
    assert created.status_code == 200, created.text
    request_id = created.json()["run_id"]
    run_id = str(
        await api.value(
            "SELECT dispatched_run_id FROM yuxi.agent_run_requests WHERE request_id = %s",
            request_id,
        )
    )
    token = str(
        await api.value("SELECT lease_token FROM yuxi.run_claim(%s, 'test-worker', 60)", run_id)
    )
    seen: list[Sse] = []
    reader = asyncio.create_task(collect_lg(api, thread, request_id, seen))
    await asyncio.sleep(0.3)  # its first read found nothing, now it waits
    last = await append_quietly(api, run_id, token, ["one", "two"])
    await announce(api, run_id, last, last - 1)
    await wait_for_event(seen)
    await finish_quietly(api, run_id, token)
    await announce(api, run_id, last + 1, last + 1)
    await asyncio.wait_for(reader, 10)
    parts = without_heartbeats(seen)
    assert [(p.event, p.id) for p in parts] == [
        ("messages", "1"),
        ("messages", "2"),
        ("updates", "2"),  # the answer, complete (an id carries over to it)
        ("end", "3"),
    ]
    assert [p.json()[0]["content"] for p in parts[:2]] == ["one", "two"]
    assert parts[2].json()["model"]["messages"][0]["content"] == "onetwo"
    assert count_stream_reads == [0]  # the stream's only read was its first
