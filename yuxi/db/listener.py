"""One LISTEN connection, kept open: reconnects with backoff and hands every payload on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from psycopg import AsyncConnection

from yuxi.db.outages import Backoff, describe, is_connection_error

log = logging.getLogger("yuxi.db")


class Listener:
    """LISTENs on ``channel`` (one name, or several on the same connection);
    ``on_notify(payload)`` runs for each notification and ``on_connect()`` after each
    (re)connection, when notifications may have been missed.

    A lost connection is re-made with a jittered back-off (0.25 s doubling to 5 s) and
    every LISTEN is issued again; the loop ends only when ``stop`` is called."""

    def __init__(
        self,
        url: str,
        channel: str | Sequence[str],
        on_notify: Callable[[str], None],
        on_connect: Callable[[], None] | None = None,
    ) -> None:
        self._url = url
        self._channels = (channel,) if isinstance(channel, str) else tuple(channel)
        self._on_notify = on_notify
        self._on_connect = on_connect
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

    async def _listen(self) -> None:
        backoff = Backoff()
        names = ", ".join(self._channels)
        while True:
            try:
                conn: AsyncConnection[Any] = await AsyncConnection.connect(
                    self._url, autocommit=True
                )
                async with conn:
                    for channel in self._channels:
                        await conn.execute(f"LISTEN {channel}")
                    self._listening.set()
                    if backoff.failures:
                        log.info("listening on %s again", names)
                    backoff.reset()
                    if self._on_connect is not None:
                        self._on_connect()
                    async for notify in conn.notifies():
                        self._on_notify(notify.payload)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                delay = backoff.next()
                if not is_connection_error(error):
                    log.exception("listener on %s failed; reconnecting in %.1fs", names, delay)
                elif backoff.failures == 1:
                    log.warning(
                        "listener on %s lost its connection (%s); reconnecting",
                        names,
                        describe(error),
                    )
                else:
                    log.debug("listener on %s: still no connection (%s)", names, describe(error))
                await asyncio.sleep(delay)
