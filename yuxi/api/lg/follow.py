"""Waiting for a LangGraph run (a request) to be dispatched or to end, on the process's
LISTEN fan-out (``EventHub``) with a re-read at least every second, like the native
request stream; and streaming its events through the native run stream's loop
(``yuxi.api.run_stream.follow_run``), translated into LangGraph's stream parts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any
from uuid import UUID

from litestar import Request
from litestar.exceptions import HTTPException

from yuxi.api.event_hub import server_closing
from yuxi.api.lg.events import Translator, ai_message, human_message, tool_message
from yuxi.api.lg.subgraphs import subagent_calls, subagent_parts
from yuxi.api.lg.views import run_ended
from yuxi.api.run_stream import HEARTBEAT, Ended, follow_run
from yuxi.api.sse import sse_message
from yuxi.api.state import AppState
from yuxi.queue.errors import NotFound
from yuxi.queue.lg import LgRun, lg_thread_runs
from yuxi.queue.statuses import DeliveryStatus
from yuxi.queue.threads import thread_messages, thread_queue

RECHECK_SECONDS = 1.0
# a user message of another request in these states is not in the thread's history
_NOT_DELIVERED = (DeliveryStatus.QUEUED, DeliveryStatus.CANCELLED, DeliveryStatus.REJECTED)


async def read_run(app: AppState, uid: UUID, thread_id: UUID, request_id: str) -> LgRun:
    async with app.pool.connection() as conn:
        rows = await lg_thread_runs(conn, uid, thread_id, request_id)
    if not rows:
        raise NotFound(f"run {request_id} not found")
    return rows[0]


async def _watch(app: AppState, row: LgRun) -> tuple[UUID, ...]:
    """What notifies a change to ``row``: its thread, and its run or (queued) the
    thread's latest run, whose end dispatches the next request."""
    if row.run_id is not None:
        return (row.thread_id, row.run_id)
    async with app.pool.connection() as conn:
        queue = await thread_queue(conn, row.thread_id)
    last = queue.last_run_id if queue is not None else None
    return (row.thread_id,) if last is None else (row.thread_id, last)


async def wait_for(
    app: AppState,
    uid: UUID,
    thread_id: UUID,
    request_id: str,
    *,
    dispatched: bool,
    first: LgRun | None = None,
) -> AsyncIterator[LgRun | None]:
    """Yields None while waiting (one per heartbeat), then the run once it is
    dispatched (``dispatched``) or has ended. ``first``: the run as just read."""
    heartbeat = app.settings.sse_heartbeat_seconds
    waited = 0.0

    def done(row: LgRun) -> bool:
        return run_ended(row) or (dispatched and row.run_id is not None)

    row = first if first is not None else await read_run(app, uid, thread_id, request_id)
    while not done(row) and not app.hub.closing:
        keys = await _watch(app, row)
        with app.hub.subscribe(*keys) as news:
            # read again once subscribed: what ended in between is seen now
            row = await read_run(app, uid, thread_id, request_id)
            if done(row):
                break
            try:
                await asyncio.wait_for(news.wait(), RECHECK_SECONDS)
            except TimeoutError:
                waited += RECHECK_SECONDS
                if waited >= heartbeat:
                    waited = 0.0
                    yield None
    yield row


async def wait_ended(
    app: AppState,
    uid: UUID,
    thread_id: UUID,
    request_id: str,
    first: LgRun | None = None,
    *,
    client: Request[Any, Any, Any] | None = None,
) -> LgRun:
    """The run once it has ended. ``client``: the request waiting for it; when its
    client goes away first, the wait stops (ClientGone) instead of reading on until a
    run that may never end does (a worker down, a long backlog)."""

    async def ended() -> LgRun:
        last = first
        rows = wait_for(app, uid, thread_id, request_id, dispatched=False, first=first)
        async for row in rows:
            last = row if row is not None else last
        assert last is not None
        return last

    if client is None:
        return await ended()
    waiting = asyncio.ensure_future(ended())
    gone = asyncio.ensure_future(_disconnected(client))
    try:
        await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (waiting, gone):
            if not task.done():
                task.cancel()
        await asyncio.gather(waiting, gone, return_exceptions=True)
    if waiting.done() and not waiting.cancelled():
        return waiting.result()
    raise ClientGone("the client went away before the run ended")


class ClientGone(HTTPException):
    """The client of a waiting request disconnected; nobody reads the answer."""

    status_code = 499


async def _disconnected(request: Request[Any, Any, Any]) -> None:
    """Returns once the request's client has disconnected (its body is read by then:
    what the server receives next is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def base_messages(app: AppState, uid: UUID, row: LgRun) -> list[dict[str, Any]]:
    """The thread's messages before this run's output, as langchain dicts (what the
    ``values`` of this run's stream start from): up to the run's own input message, or
    for a resume run everything stored but its own output."""
    async with app.pool.connection() as conn:
        stored = await thread_messages(conn, uid, row.thread_id)
    messages: list[dict[str, Any]] = []
    for m in stored:
        own = m.request_id == row.request_id
        if m.role == "user":
            if m.delivery_status in _NOT_DELIVERED and not own:
                continue
            messages.append(human_message(f"yuxi-input-{m.run_id}", m.content))
            if own:
                break
        elif m.run_id is not None and m.run_id == row.run_id:
            continue  # this run's output: the stream adds it
        elif m.role == "assistant":
            messages.append(ai_message(f"msg-{m.id}", m.content, m.metadata.get("tool_calls", [])))
        else:
            messages.append(
                tool_message(
                    f"msg-{m.id}",
                    m.content,
                    str(m.metadata.get("tool_call_id")),
                    str(m.metadata.get("name")),
                    str(m.metadata.get("status") or "success"),
                )
            )
    return messages


async def stream_run(
    app: AppState,
    uid: UUID,
    thread_id: UUID,
    request_id: str,
    modes: list[str],
    after: int,
    first: LgRun | None = None,
    *,
    subgraphs: bool = False,
) -> AsyncGenerator[bytes]:
    """The run's stream parts after seq ``after`` (0: from the start), until its end;
    with ``subgraphs``, each subagent run it starts streams inside it (lg.subgraphs)."""
    row = None
    async for seen in wait_for(app, uid, thread_id, request_id, dispatched=True, first=first):
        if seen is None:
            yield HEARTBEAT
        row = seen
    if app.hub.closing:
        yield server_closing()
        return
    assert row is not None
    if row.run_id is None:  # left the queue without running (cancelled, superseded)
        yield sse_message("null", event="end")
        return
    base = await base_messages(app, uid, row) if "values" in modes else []
    translator = Translator(modes, request_id, str(thread_id), base)
    # every event from the first one: the parts after ``after`` build on those before
    followed = follow_run(app, row.run_id, app.hub.listen(row.run_id))
    last = 0
    streamed: set[UUID] = set()  # subagent runs already sent
    try:
        async with aclosing(followed):
            async for item in followed:
                if isinstance(item, bytes):
                    yield item
                elif isinstance(item, Ended):
                    # ended without an end event in the log (ended by hand)
                    yield sse_message("null", event="end", id=last)
                else:
                    seq, event, payload = item
                    last = seq
                    data = json.loads(payload)
                    messages = translator.feed(seq, event, data)
                    if seq > after:
                        for message in messages:
                            yield message
                    calls = subagent_calls(event, data) if subgraphs else []
                    if calls and seq >= after:
                        parts = subagent_parts(app, uid, row, modes, calls, seq, streamed)
                        async for part in parts:
                            yield part
    except NotFound:  # the run is gone (its thread was deleted and purged)
        yield sse_message("null", event="end")
