"""Run events: the durable, gap-free log SSE clients read and resume from."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from yuxi.queue.calls import call_scalar, encode_json
from yuxi.queue.models import RunEvent

EVENTS_CHANNEL = "yuxi_run_events"  # NOTIFY payload: "<run_id> <last seq>"
CANCEL_CHANNEL = "yuxi_run_cancel"  # NOTIFY payload: "<run_id>"


async def append_events(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    events: Sequence[RunEvent],
    *,
    now: datetime | None = None,
    notify_after_commit: bool = False,
) -> int:
    """Appends events as the lease holder; returns the seq of the last one.

    ``notify_after_commit`` (autocommit connections only): send the NOTIFY from a
    transaction of its own once the events are committed, so the append does not
    queue on PostgreSQL's cluster-wide lock for notifying commits."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.run_append_events(%(r)s, %(t)s, %(e)s::jsonb, %(now)s, %(n)s)",
        {
            "r": run_id,
            "t": token,
            "e": encode_json(list(events)),
            "now": now,
            "n": not notify_after_commit,
        },
    )
    if notify_after_commit:
        await notify_run_events(conn, run_id, int(value))
    return int(value)


async def notify_run_events(conn: AsyncConnection[Any], run_id: UUID, seq: int) -> None:
    """Tells listeners that ``run_id`` has events up to ``seq`` (on its own, after commit)."""
    if not conn.autocommit:
        raise RuntimeError("notify after commit needs an autocommit connection")
    await conn.execute("SELECT pg_notify(%s, %s)", (EVENTS_CHANNEL, f"{run_id} {seq}"))
