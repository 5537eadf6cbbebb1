"""One LISTEN connection per API process, fanned out to every SSE client.

A notification ``"<run_id> <seq>"`` on yuxi_run_events wakes the clients streaming that
run; each then reads the new events from the table. A worker's notification also
carries the events it announces (``yuxi.run_events_announce``): they are parsed once and
handed to every stream of the run (``Subscription.take``), and a stream that has sent
everything before them sends them without a read. A notification ``"<thread_id>"`` on
yuxi_request_events wakes the clients following a request of that thread: triggers send
it on a change to a thread's queue that no run's end announces (a queued request
cancelled or steered, a paused backlog resumed; sql/schema/10_events.sql). Clients
also re-read after each heartbeat interval, so a lost notification delays an event,
never loses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import weakref
from collections import defaultdict
from collections.abc import Iterator
from uuid import UUID

from yuxi.api.sse import sse_message
from yuxi.db.listener import Listener
from yuxi.queue.events import EVENTS_CHANNEL

REQUESTS_CHANNEL = "yuxi_request_events"  # NOTIFY payload: "<thread_id>"
START_WAIT_SECONDS = 2.0
RETRY_AFTER_CLOSE_MS = 500
# notifications a stream keeps while it is busy sending; past that it reads instead
MAX_HELD = 64

# an event a notification carried: (seq, event, payload as JSON text)
Carried = tuple[int, str, str]
# what one notification announced: the run's last seq, and the events it carried
Announced = tuple[int, tuple[Carried, ...]]


def server_closing() -> bytes:
    """The last message of a stream cut by a shutdown: ``retry`` tells the client to
    reconnect (with ``Last-Event-ID``) after half a second, to the next server."""
    return sse_message(comment="server shutting down", retry=RETRY_AFTER_CLOSE_MS)


class EventHub:
    def __init__(self, url: str) -> None:
        # weakly: a subscription whose stream was dropped unread goes with it (listen)
        self._waiters: dict[UUID, weakref.WeakSet[asyncio.Event]] = defaultdict(weakref.WeakSet)
        # after a reconnect everyone re-reads: notifications may have been missed
        self._listener = Listener(
            url, (EVENTS_CHANNEL, REQUESTS_CHANNEL), self._wake, self._wake_all
        )
        self._closing = False

    async def start(self) -> None:
        """Starts listening. An API that starts while the database is down still serves
        (503 until it is back): after a short wait the listener goes on connecting in
        the background, and streams re-read every heartbeat meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._listener.start(), START_WAIT_SECONDS)

    async def stop(self) -> None:
        await self._listener.stop()

    @property
    def closing(self) -> bool:
        """The server is shutting down: streams end (with a ``retry`` hint) instead of
        waiting, so the process exits at once and clients resume on the next one."""
        return self._closing

    def close(self) -> None:
        """Marks the hub closing and wakes every stream waiting on it."""
        self._closing = True
        self._wake_all()

    @property
    def listeners(self) -> int:
        """Streams waiting for news (one may wait on several keys)."""
        return len({event for waiters in self._waiters.values() for event in waiters})

    @contextlib.contextmanager
    def subscribe(self, *keys: UUID) -> Iterator[asyncio.Event]:
        """An event set on each notification for any of ``keys`` (run or thread ids)
        while in the block. Subscribe before reading, so news that lands during the read
        is not missed."""
        event = asyncio.Event()
        for key in keys:
            self._waiters[key].add(event)
        try:
            yield event
        finally:
            self._unsubscribe(event, keys)

    def listen(self, *keys: UUID) -> Subscription:
        """``subscribe`` for a stream whose body starts later (the first read is made by
        its request's handler): the body closes it; one never started is dropped with
        its stream, since the hub holds its event weakly. It also keeps what each
        notification announced, for ``Subscription.take``."""
        event = _Inbox()
        for key in keys:
            self._waiters[key].add(event)
        return Subscription(self, event, keys)

    def _unsubscribe(self, event: asyncio.Event, keys: tuple[UUID, ...]) -> None:
        for key in keys:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[key]

    def _wake(self, payload: str) -> None:
        head, _, body = payload.partition("\n")
        key, _, seq = head.partition(" ")
        try:
            target = UUID(key)
        except ValueError:
            return
        waiters = self._waiters.get(target)
        if waiters is None:
            return
        if not waiters:  # its streams were dropped unread
            del self._waiters[target]
        announced: Announced | None = None
        for event in list(waiters):
            if isinstance(event, _Inbox):
                if announced is None:
                    announced = _announced(seq, body)
                event.hold(announced)
            event.set()

    def _wake_all(self) -> None:
        for waiters in list(self._waiters.values()):
            for event in list(waiters):
                if isinstance(event, _Inbox):
                    event.stale = True  # notifications may have been missed: read
                event.set()


def _announced(seq: str, body: str) -> Announced:
    """A run notification's last seq and carried events (none: a bare notification, or
    one this version cannot read, which leaves the stream to read)."""
    try:
        last = int(seq)
    except ValueError:  # e.g. a NOTIFY sent by hand with the run id alone
        return (sys.maxsize, ())
    carried: list[Carried] = []
    if body:
        for line in body.split("\n"):
            number, _, rest = line.partition("\t")
            event, _, text = rest.partition("\t")
            try:
                carried.append((int(number), event, text))
            except ValueError:
                return (last, ())
    return (last, tuple(carried))


class _Inbox(asyncio.Event):
    """A stream's event, with what the notifications it was set for announced; ``stale``:
    something may be missing from them (too many held, the listener reconnected, the
    server is closing), so the stream reads."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[Announced] = []
        self.stale = False

    def hold(self, announced: Announced) -> None:
        if len(self.held) >= MAX_HELD:
            self.held.clear()
            self.stale = True
        else:
            self.held.append(announced)

    def reset(self) -> tuple[list[Announced], bool]:
        """What was held and whether it is stale, forgotten; the event cleared."""
        held, stale = self.held, self.stale
        self.held, self.stale = [], False
        self.clear()
        return held, stale


class Subscription:
    """A stream's subscription made by ``EventHub.listen``: ``event`` is set on news."""

    __slots__ = ("_hub", "_keys", "event")

    def __init__(self, hub: EventHub, event: _Inbox, keys: tuple[UUID, ...]) -> None:
        self._hub = hub
        self._keys = keys
        self.event = event

    def take(self, after: int) -> list[Carried] | None:
        """The events announced since the last ``take`` that follow seq ``after``, in
        order; None when they do not continue it without a gap up to the last seq
        announced (a bare notification, a payload that was full, a notification
        missed): the stream then reads. Clears ``event``; what is announced later sets
        it again."""
        held, stale = self.event.reset()
        if stale:
            return None
        taken: list[Carried] = []
        for last, carried in held:
            for item in carried:
                if item[0] == after + 1:
                    taken.append(item)
                    after += 1
                elif item[0] > after:
                    return None
            if last > after:
                return None
        return taken

    def drop(self) -> None:
        """Forgets what was announced so far (a read covers it), and clears ``event``."""
        self.event.reset()

    def close(self) -> None:
        self._hub._unsubscribe(self.event, self._keys)
