"""One LISTEN connection per API process, fanned out to every SSE client.

A notification ``"<run_id> <seq>"`` on yuxi_run_events wakes the clients streaming that
run; each then reads the new events from the table. Clients also re-read after each
heartbeat interval, so a lost notification delays an event, never loses it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Iterator
from uuid import UUID

from yuxi.db.listener import Listener
from yuxi.queue.events import EVENTS_CHANNEL


class EventHub:
    def __init__(self, url: str) -> None:
        self._waiters: dict[UUID, set[asyncio.Event]] = defaultdict(set)
        # after a reconnect everyone re-reads: notifications may have been missed
        self._listener = Listener(url, EVENTS_CHANNEL, self._wake, self._wake_all)

    async def start(self) -> None:
        await self._listener.start()

    async def stop(self) -> None:
        await self._listener.stop()

    @property
    def listeners(self) -> int:
        return sum(len(waiters) for waiters in self._waiters.values())

    @contextlib.contextmanager
    def subscribe(self, run_id: UUID) -> Iterator[asyncio.Event]:
        """An event set on each notification for ``run_id`` while in the block. Subscribe
        before reading, so news that lands during the read is not missed."""
        event = asyncio.Event()
        self._waiters[run_id].add(event)
        try:
            yield event
        finally:
            waiters = self._waiters.get(run_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[run_id]

    def _wake(self, payload: str) -> None:
        run, _, _seq = payload.partition(" ")
        try:
            run_id = UUID(run)
        except ValueError:
            return
        for event in self._waiters.get(run_id, ()):
            event.set()

    def _wake_all(self) -> None:
        for waiters in self._waiters.values():
            for event in waiters:
                event.set()
