"""Run events: the durable, gap-free log SSE clients read and resume from."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from yuxi.queue.calls import call_scalar
from yuxi.queue.models import RunEvent
from yuxi.queue.runs import encode_json

EVENTS_CHANNEL = "yuxi_run_events"  # NOTIFY payload: "<run_id> <last seq>"
CANCEL_CHANNEL = "yuxi_run_cancel"  # NOTIFY payload: "<run_id>"


async def append_events(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    events: Sequence[RunEvent],
    *,
    now: datetime | None = None,
) -> int:
    """Appends events as the lease holder; returns the seq of the last one."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.run_append_events(%(r)s, %(t)s, %(e)s::jsonb, %(now)s)",
        {"r": run_id, "t": token, "e": encode_json(list(events)), "now": now},
    )
    return int(value)
