"""A run's event writer: batches the events one run appends while it executes."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from psycopg_pool import AsyncConnectionPool

from yuxi.db.outages import Backoff, describe, is_connection_error
from yuxi.queue.errors import LeaseLost
from yuxi.queue.events import RunEvent, StoredEvent, notify_run_events, run_append_batch
from yuxi.queue.runs import RunLease
from yuxi.runtime.graph_io import text_of, tool_calls_of

log = logging.getLogger("yuxi.runtime")


class EventWriter:
    """Buffers a run's events and appends them in batches, in order: message chunks are
    coalesced, and pending events are written at most ``flush_seconds`` after the first
    of them arrived. What is left at the end goes into the run's finishing transaction
    (``remaining``), so a short run writes all its events with its finish.

    Each batch carries its number within the attempt (``yuxi.run_append_batch``). A
    write whose outcome is unknown (the connection broke, perhaps after the commit) is
    sent again, unchanged and under the same number, before anything newer: the database
    skips it if it was stored, so an event is never written twice. While the database
    is unreachable the writer keeps trying with a back-off."""

    def __init__(self, pool: AsyncConnectionPool[Any], lease: RunLease, flush_seconds: float):
        self._pool = pool
        self._lease = lease
        self._flush_seconds = flush_seconds
        self._pending: list[RunEvent] = []
        self._chunks: list[dict[str, Any]] = []
        self._batches = 0
        # a batch sent whose outcome is unknown: (number, events)
        self._unconfirmed: tuple[int, list[RunEvent]] | None = None
        # the first and last seqs committed by another call without a NOTIFY (the
        # manifest's commit writes the attempt's metadata), not announced yet
        self._unannounced_from: int | None = None
        self._unannounced: int | None = None
        self._timer: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._backoff = Backoff()
        # the ids of the messages whose text was buffered as message chunks
        self.streamed: set[str | None] = set()
        # the tool calls whose call and result events the run has (earlier attempts')
        self._calls: set[str] = set()
        self._results: set[str] = set()

    async def seen(self, stored: list[StoredEvent]) -> None:
        """The run's events of earlier attempts: a message or tool call they announced
        is not announced again."""
        for event in stored:
            payload = event.payload
            if event.event == "messages":
                self.streamed.update(c.get("message_id") for c in payload.get("chunks") or [])
            elif event.event == "tool" and payload.get("type") == "call":
                self._calls.update(str(c.get("id")) for c in payload.get("calls") or [])
            elif event.event == "tool" and payload.get("type") == "result":
                self._results.add(str(payload.get("tool_call_id")))

    def next_batch(self) -> int:
        """The attempt's next batch number, for events another call appends in its own
        transaction (the manifest's commit appends the attempt's ``metadata``)."""
        self._batches += 1
        return self._batches

    def appended(self, seq: int) -> None:
        """The event ``seq`` was committed by another call without a NOTIFY: it is
        announced with the next batch or the run's end, or on its own (a NOTIFY and no
        append) ``flush_seconds`` from now if neither came first."""
        if self._unannounced_from is None:
            self._unannounced_from = seq
        self._unannounced = seq
        self._schedule()

    @property
    def unannounced_from(self) -> int | None:
        """The first seq committed without a NOTIFY and not announced since (None: none),
        for the run's end to announce with its own events."""
        return self._unannounced_from

    async def add(self, event: RunEvent) -> None:
        """Queues ``event`` after the message chunks buffered so far."""
        self._close_chunks()
        self._pending.append(event)
        self._schedule()

    def message_chunk(self, message_id: str | None, text: str) -> None:
        """Buffers streamed text, joined to the previous chunk of the same message, and
        remembers the message as streamed. Synchronous: the models' callback calls it in
        the run's task (yuxi.agents.models.usage)."""
        self.streamed.add(message_id)
        if self._chunks and self._chunks[-1]["message_id"] == message_id:
            self._chunks[-1]["text"] += text
        else:
            self._chunks.append({"message_id": message_id, "text": text})
        self._schedule()

    async def tool_activity(self, message: BaseMessage) -> None:
        """A ``tool`` event for an AI message that calls tools, or for a tool result
        (once per run: not again for one an earlier attempt announced)."""
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = tool_calls_of(message)
            if all(str(c["id"]) in self._calls for c in calls):
                return
            self._calls.update(str(c["id"]) for c in calls)
            await self.add(RunEvent("tool", {"type": "call", "calls": calls}))
        elif isinstance(message, ToolMessage):
            if message.tool_call_id in self._results:
                return
            self._results.add(message.tool_call_id)
            await self.add(
                RunEvent(
                    "tool",
                    {
                        "type": "result",
                        "tool_call_id": message.tool_call_id,
                        "name": message.name,
                        "status": message.status,
                        "content": text_of(message),
                    },
                )
            )

    async def error(self, error_type: str, message: str) -> None:
        """The ``error`` event that precedes a failed finish."""
        await self.add(RunEvent("error", {"error_type": error_type, "message": message}))

    async def remaining(self) -> list[RunEvent]:
        """The events never sent, for the finishing transaction. From the first call the
        writer stops writing on its own; a batch whose outcome is unknown is first sent
        again (raising if that fails too, so the caller retries). A write already under
        way is waited for, never cut off mid-transaction. Calling it again returns the
        same events, plus any added since."""
        self._closed = True
        self._unannounced = None  # the run's end announces everything before it
        # (unannounced_from stays, for the end's notification to carry those events)
        if self._timer is not None:
            if self._lock.locked():
                await asyncio.gather(self._timer, return_exceptions=True)
            else:
                self._timer.cancel()
            self._timer = None
        async with self._lock:
            self._close_chunks()
            await self._confirm()
            return list(self._pending)

    def _schedule(self, delay: float | None = None) -> None:
        if self._closed:
            return
        if self._timer is None or self._timer.done():
            wait = self._flush_seconds if delay is None else delay
            self._timer = asyncio.create_task(self._flush_later(wait))

    async def _flush_later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        try:
            await self.flush()
        except LeaseLost:
            return  # the run's executor finds out on its next renewal or its finish
        except Exception as error:
            if not is_connection_error(error):
                log.exception("run %s: appending events failed", self._lease.run_id)
            elif self._backoff.failures == 0:
                log.warning(
                    "run %s: appending events failed (%s); they are sent again",
                    self._lease.run_id,
                    describe(error),
                )
            self._timer = None
            self._schedule(self._backoff.next())
            return
        self._backoff.reset()

    def _close_chunks(self) -> None:
        if self._chunks:
            self._pending.append(RunEvent("messages", {"chunks": self._chunks}))
            self._chunks = []

    async def flush(self) -> None:
        """Appends everything pending now (or, with nothing pending, announces what
        another call appended); on failure keeps it for the next write."""
        async with self._lock:
            self._close_chunks()
            await self._confirm()
            if self._pending:
                self._batches += 1
                self._unconfirmed = (self._batches, self._pending)
                self._pending = []
                await self._confirm()
            elif self._unannounced is not None:
                async with self._pool.connection() as conn:
                    await notify_run_events(
                        conn, self._lease.run_id, self._unannounced, self._unannounced_from
                    )
                self._unannounced = self._unannounced_from = None

    async def _confirm(self) -> None:
        """Sends the batch whose outcome is unknown, if any, until it is known."""
        if self._unconfirmed is None:
            return
        number, batch = self._unconfirmed
        async with self._pool.connection() as conn:
            await run_append_batch(
                conn,
                self._lease.run_id,
                self._lease.token,
                number,
                batch,
                notify_after_commit=True,
                announce_from=self._unannounced_from,
            )
        self._unconfirmed = None
        # the batch's NOTIFY announced what came before it too
        self._unannounced = self._unannounced_from = None
