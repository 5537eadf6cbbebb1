"""A request's progress as Server-Sent Events: its place in the queue, its run, its end.

The stream waits on the process's LISTEN fan-out (``EventHub``), never on a polling loop
of its own: a queued request wakes when the thread's latest run notifies (its end is
committed together with the dispatch of the next request) or when triggers announce any
other change to the thread's queue (cancel, steer, continue, resume; from the API or
psql alike). Each wake, and each heartbeat, re-reads the request, so a missed
notification delays an event by one heartbeat at most.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from litestar import Controller, get
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath
from psycopg import AsyncConnection

from yuxi.api.auth import User
from yuxi.api.event_hub import server_closing
from yuxi.api.sse import EventStream, sse_message
from yuxi.api.state import AppState
from yuxi.queue.requests import RequestInfo, request_get
from yuxi.queue.runs import Run, run_get
from yuxi.queue.statuses import ENDED_RUN_STATUSES, RequestStatus
from yuxi.queue.threads import thread_queue


class RequestEventsController(Controller):
    path = "/api/agent"
    tags = ("runs",)

    @get(
        "/requests/{request_id:str}/events",
        summary="A request's progress as Server-Sent Events",
    )
    async def events(
        self,
        state: State,
        conn: NamedDependency[AsyncConnection[Any]],
        user: NamedDependency[User],
        request_id: FromPath[str],
    ) -> EventStream:
        """``queued`` ``{queue_position}`` whenever its place changes, ``run_created``
        ``{run_id}`` once dispatched, then exactly one ``end`` ``{status, run_id}``."""
        info = await request_get(conn, request_id, uid=user.uid)  # 404 before streaming
        return EventStream(_follow(state.yuxi, info))


@dataclass(frozen=True)
class _Snapshot:
    """The request as read now; ``watch`` is the run whose notifications matter to it."""

    info: RequestInfo
    run: Run | None
    watch: UUID | None


@dataclass
class _Told:
    """What the stream has sent its client so far."""

    position: int | None = None
    run_id: UUID | None = None
    ended: bool = False

    def news(self, now: _Snapshot) -> Iterator[bytes]:
        """The events that bring the client from what it was told to ``now``."""
        info = now.info
        if info.status == RequestStatus.QUEUED:
            if info.queue_position != self.position:
                self.position = info.queue_position
                yield _event("queued", {"queue_position": info.queue_position})
            return
        if info.run_id is not None and self.run_id is None:
            self.run_id = info.run_id
            yield _event("run_created", {"run_id": str(info.run_id)})
        end = _end_payload(now)
        if end is not None:
            self.ended = True
            yield _event("end", end)


def _end_payload(now: _Snapshot) -> dict[str, Any] | None:
    """The ``end`` of a request that is over (left the queue without a run, or its run
    finished); None while it still waits or runs."""
    info, run = now.info, now.run
    if info.run_id is None:
        return {"status": info.status, "run_id": None}
    if run is None or run.status not in ENDED_RUN_STATUSES:
        return None
    end: dict[str, Any] = {"status": run.status, "run_id": str(run.run_id)}
    if run.error_type is not None:
        end["error_type"] = run.error_type
    if run.error_message is not None:
        end["error_message"] = run.error_message
    return end


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return sse_message(json.dumps(payload), event=name)


async def _read(app: AppState, request_id: str, last: _Snapshot | None) -> _Snapshot:
    async with app.pool.connection() as conn:
        if last is not None and last.info.run_id is not None:
            # a dispatched request does not change again: only its run does
            return _Snapshot(last.info, await run_get(conn, last.info.run_id), last.watch)
        info = await request_get(conn, request_id)
        if info.run_id is not None:
            return _Snapshot(info, await run_get(conn, info.run_id), info.run_id)
        if info.status != RequestStatus.QUEUED:
            return _Snapshot(info, None, None)
        # the thread's latest run: its end is committed with the next dispatch
        queue = await thread_queue(conn, info.thread_id)
        return _Snapshot(info, None, queue.last_run_id if queue is not None else None)


async def _follow(app: AppState, first: RequestInfo) -> AsyncIterator[bytes]:
    heartbeat = app.settings.sse_heartbeat_seconds
    told = _Told()
    keys: tuple[UUID, ...] = (first.thread_id,)
    now: _Snapshot | None = None
    while True:
        if app.hub.closing:
            yield server_closing()
            return
        with app.hub.subscribe(*keys) as news:
            now = await _read(app, first.request_id, now)
            for message in told.news(now):
                yield message
            if told.ended:
                return
            wanted = (first.thread_id,) if now.watch is None else (first.thread_id, now.watch)
            if wanted != keys:
                # listen to the run that matters now, then read again: it may have
                # notified between the read and the subscription
                keys = wanted
                continue
            try:
                await asyncio.wait_for(news.wait(), heartbeat)
            except TimeoutError:
                yield sse_message(comment="heartbeat")
