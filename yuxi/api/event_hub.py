"""One LISTEN connection per API process, fanned out to every SSE client.

A notification ``"<run_id> <seq>"`` on yuxi_run_events wakes the clients streaming that
run; each then reads the new events from the table. Clients also re-read after each
heartbeat interval, so a lost notification delays an event, never loses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Iterator
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from yuxi.queue.events import EVENTS_CHANNEL

log = logging.getLogger("yuxi.api")


class EventHub:
    def __init__(self, url: str) -> None:
        self._url = url
        self._waiters: dict[UUID, set[asyncio.Event]] = defaultdict(set)
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen())
        await asyncio.wait_for(self._ready.wait(), timeout=30)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

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

    async def _listen(self) -> None:
        delay = 0.5
        while True:
            try:
                conn: AsyncConnection[Any] = await AsyncConnection.connect(
                    self._url, autocommit=True
                )
                async with conn:
                    await conn.execute(f"LISTEN {EVENTS_CHANNEL}")
                    self._ready.set()
                    delay = 0.5
                    # wake everyone after a reconnect: notifications may have been missed
                    self._wake_all()
                    async for notify in conn.notifies():
                        self._wake(notify.payload)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("event listener lost its connection; reconnecting in %.1fs", delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

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
