"""One LISTEN connection per worker process for cancel requests, fanned out to the
runs this process executes. Lease renewals poll as a fallback, so a lost notification
delays a cancel by at most one renewal interval."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from uuid import UUID

from yuxi.db.listener import Listener
from yuxi.queue.events import CANCEL_CHANNEL

START_WAIT_SECONDS = 2.0


class CancelWatcher:
    def __init__(self, url: str) -> None:
        self._events: dict[UUID, asyncio.Event] = {}
        self._listener = Listener(url, CANCEL_CHANNEL, self._deliver)

    async def start(self) -> None:
        """Starts listening; returns once the LISTEN is in place, or after a short wait
        while the database is down (the listener goes on connecting in the background;
        renewals poll for cancels meanwhile), so a worker starts without its database."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._listener.start(), START_WAIT_SECONDS)

    async def stop(self) -> None:
        await self._listener.stop()

    @contextlib.contextmanager
    def watch(self, run_id: UUID) -> Iterator[asyncio.Event]:
        """An event set when a cancel of ``run_id`` is requested, while in the block."""
        event = self._events.setdefault(run_id, asyncio.Event())
        try:
            yield event
        finally:
            self._events.pop(run_id, None)

    def _deliver(self, payload: str) -> None:
        try:
            run_id = UUID(payload)
        except ValueError:
            return
        event = self._events.get(run_id)
        if event is not None:
            event.set()
