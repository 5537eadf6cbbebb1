"""One LISTEN connection per worker process for cancel requests, fanned out to the
runs this process executes. Lease renewals poll as a fallback, so a lost notification
delays a cancel by at most one renewal interval."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from yuxi.queue.events import CANCEL_CHANNEL

log = logging.getLogger("yuxi.runtime")


class CancelWatcher:
    def __init__(self, url: str) -> None:
        self._url = url
        self._events: dict[UUID, asyncio.Event] = {}
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()

    async def start(self) -> None:
        """Starts listening; returns once the LISTEN is in place."""
        self._task = asyncio.create_task(self._listen())
        await asyncio.wait_for(self._listening.wait(), timeout=30)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    @contextlib.contextmanager
    def watch(self, run_id: UUID) -> Iterator[asyncio.Event]:
        """An event set when a cancel of ``run_id`` is requested, while in the block."""
        event = self._events.setdefault(run_id, asyncio.Event())
        try:
            yield event
        finally:
            self._events.pop(run_id, None)

    async def _listen(self) -> None:
        delay = 0.5
        while True:
            try:
                conn: AsyncConnection[Any] = await AsyncConnection.connect(
                    self._url, autocommit=True
                )
                async with conn:
                    await conn.execute(f"LISTEN {CANCEL_CHANNEL}")
                    self._listening.set()
                    delay = 0.5
                    async for notify in conn.notifies():
                        self._deliver(notify.payload)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("cancel listener lost its connection; reconnecting in %.1fs", delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    def _deliver(self, payload: str) -> None:
        try:
            run_id = UUID(payload)
        except ValueError:
            return
        event = self._events.get(run_id)
        if event is not None:
            event.set()
