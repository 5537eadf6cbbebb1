"""Following a run's events (``yuxi.run_events``) from a seq until its end: the one loop
behind the native stream (``GET /api/agent/runs/{id}/events``) and ``/lg``'s run streams.

The stream is subscribed (``EventHub.listen``) before its first read, so what is
committed after a read notifies it. The events a worker's notification carries that
continue what was followed go out as they came (``Subscription.take``), without a read;
a gap, a bare notification, a listener's reconnect or a heartbeat make the stream read
(``yuxi.run_stream_read``: the events and the run's status in one snapshot).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import NamedTuple
from uuid import UUID

from yuxi.api.event_hub import Carried, Subscription, server_closing
from yuxi.api.sse import sse_message
from yuxi.api.state import AppState
from yuxi.queue.errors import NotFound
from yuxi.queue.events import StreamRead, run_stream_read
from yuxi.queue.statuses import ENDED_RUN_STATUSES

STREAM_PAGE = 1000  # events a stream reads at once
HEARTBEAT = sse_message(comment="heartbeat")


class Ended(NamedTuple):
    """The run has ended (``status``) and its ``end`` event was not among the events
    followed: the stream started past it, or the run was ended by hand (outside the
    queue's functions, without an ``end``). ``last_seq``: the run's last event seq."""

    status: str
    last_seq: int


# what a followed stream yields: a stored event (seq, event, payload as the stored JSON
# text; the ``init`` row of a first read has seq 0), a message to send as it is (a
# heartbeat, the server closing), or the run's end when its end event was not followed
Followed = Carried | bytes | Ended


async def follow_run(
    app: AppState,
    run_id: UUID,
    subscription: Subscription,
    after: int = 0,
    first: list[StreamRead] | None = None,
) -> AsyncGenerator[Followed]:
    """The run's events after seq ``after``, in order, until its ``end`` event (the last
    item then) or an ``Ended``; ``HEARTBEAT`` after each quiet heartbeat interval (then
    it reads again); ``server_closing()`` last when the server shuts down.

    ``subscription``: ``app.hub.listen(run_id)``, made before ``first`` (the stream's
    first read, made by its handler; None: the first read is made here); closed when the
    iteration ends, however it ends (the client gone too). NotFound once the run is gone.
    """
    heartbeat = app.settings.sse_heartbeat_seconds
    news = subscription.event
    last = after
    rows = first
    try:
        while True:
            if rows is None:
                if app.hub.closing:
                    yield server_closing()
                    return
                # events and the run's status in one snapshot: a run seen ended has all
                # its events in the same read; a notification from now on wakes the wait
                subscription.drop()
                async with app.pool.connection() as conn:
                    rows = await run_stream_read(conn, run_id, last, STREAM_PAGE)
                if not rows:
                    raise NotFound(f"run {run_id} not found")
            sent = 0
            for row in rows:
                seq, event, payload = row.seq, row.event, row.payload
                if seq is None or event is None or payload is None:
                    break  # the row of a read with no event
                if event == "init":  # the stream's first message: the run's input
                    yield (seq, event, payload)
                    continue
                last = seq
                sent += 1
                yield (seq, event, payload)
                if event == "end":
                    return
            status, last_seq = rows[-1].run_status, rows[-1].last_event_seq
            rows = None
            if sent == STREAM_PAGE:
                continue  # a full page: more may be stored already
            if status in ENDED_RUN_STATUSES:
                # ended, and its end was not in this read: the stream is already past
                # it, or the run was ended by hand
                yield Ended(status, last_seq)
                return
            # what is committed after the read notifies this subscription; the events a
            # notification carries that follow what was sent go out without a read
            while True:
                try:
                    await asyncio.wait_for(news.wait(), heartbeat)
                except TimeoutError:
                    yield HEARTBEAT
                    break
                carried = subscription.take(last)
                if carried is None or app.hub.closing:
                    break
                for item in carried:
                    last = item[0]
                    yield item
                    if item[1] == "end":
                        return
    finally:
        subscription.close()
