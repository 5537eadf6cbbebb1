"""A run's event writer: batches the events one run appends while it executes."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from psycopg_pool import AsyncConnectionPool

from yuxi.queue.errors import LeaseLost
from yuxi.queue.events import RunEvent, run_append_events
from yuxi.queue.runs import ClaimedRun
from yuxi.runtime.graph_io import text_of, tool_calls_of

log = logging.getLogger("yuxi.runtime")


class EventWriter:
    """Buffers a run's events and appends them in batches, in order: message chunks are
    coalesced, and pending events are written at most ``flush_seconds`` after the first
    of them arrived. What is left at the end goes into the run's finishing transaction
    (``take``), so a short run writes all its events with its finish."""

    def __init__(self, pool: AsyncConnectionPool[Any], claimed: ClaimedRun, flush_seconds: float):
        self._pool = pool
        self._claimed = claimed
        self._flush_seconds = flush_seconds
        self._pending: list[RunEvent] = []
        self._chunks: list[dict[str, Any]] = []
        self._timer: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def add(self, event: RunEvent) -> None:
        """Queues ``event`` after the message chunks buffered so far."""
        self._close_chunks()
        self._pending.append(event)
        self._schedule()

    async def message_chunk(self, message_id: str | None, text: str) -> None:
        """Buffers streamed text, joined to the previous chunk of the same message."""
        if self._chunks and self._chunks[-1]["message_id"] == message_id:
            self._chunks[-1]["text"] += text
        else:
            self._chunks.append({"message_id": message_id, "text": text})
        self._schedule()

    async def tool_activity(self, message: BaseMessage) -> None:
        """A ``tool`` event for an AI message that calls tools, or for a tool result."""
        if isinstance(message, AIMessage) and message.tool_calls:
            await self.add(RunEvent("tool", {"type": "call", "calls": tool_calls_of(message)}))
        elif isinstance(message, ToolMessage):
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

    async def take(self) -> list[RunEvent]:
        """The events not written yet; the writer forgets them and stops its timer (a
        write already under way is waited for, never cut off mid-transaction)."""
        if self._timer is not None:
            if self._lock.locked():
                await asyncio.gather(self._timer, return_exceptions=True)
            else:
                self._timer.cancel()
            self._timer = None
        async with self._lock:
            self._close_chunks()
            pending, self._pending = self._pending, []
        return pending

    def _schedule(self) -> None:
        if self._timer is None or self._timer.done():
            self._timer = asyncio.create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(self._flush_seconds)
        try:
            await self.flush()
        except LeaseLost:
            pass  # the run's executor finds out on its next renewal or its finish
        except Exception:
            log.exception(
                "run %s: appending events failed; they go with the finish", self._claimed.run_id
            )

    def _close_chunks(self) -> None:
        if self._chunks:
            self._pending.append(RunEvent("messages", {"chunks": self._chunks}))
            self._chunks = []

    async def flush(self) -> None:
        """Appends everything pending now; on failure keeps it for the next write."""
        async with self._lock:
            self._close_chunks()
            if not self._pending:
                return
            batch, self._pending = self._pending, []
            try:
                async with self._pool.connection() as conn:
                    await run_append_events(
                        conn,
                        self._claimed.run_id,
                        self._claimed.lease_token,
                        batch,
                        notify_after_commit=True,
                    )
            except Exception:
                self._pending[:0] = batch  # keep them, in order, for the next write
                raise
