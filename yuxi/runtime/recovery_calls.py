"""Wrappers of the SQL functions that keep runs and deliveries going through database
outages (delta 0004): ``yuxi.run_append_batch``, ``yuxi.run_retry``,
``yuxi.run_redeliver_stalled``, ``yuxi.delivery_prune``.

They belong with their nouns in ``yuxi/queue/`` (events.py, runs.py, maintenance.py),
which this change does not own; each is written as it would be there, under its SQL
name, so moving it is a cut and paste.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from yuxi.queue.calls import call_many, call_one, call_scalar, encode_json
from yuxi.queue.events import RunEvent, notify_run_events
from yuxi.queue.maintenance import RedeliveredRun
from yuxi.queue.runs import Run


async def run_append_batch(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    batch: int,
    events: Sequence[RunEvent],
    *,
    now: datetime | None = None,
    notify_after_commit: bool = False,
) -> int:
    """Appends the attempt's event batch number ``batch`` (1, 2, ... per attempt) as the
    lease holder; a batch already stored is skipped, so re-sending one whose reply was
    lost stores nothing twice. Returns the run's last seq.

    ``notify_after_commit``: as for ``run_append_events``."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.run_append_batch(p_run_id => %(run_id)s, p_token => %(token)s,"
        " p_batch => %(batch)s, p_events => %(events)s::jsonb, p_now => %(now)s,"
        " p_notify => %(notify)s)",
        {
            "run_id": run_id,
            "token": token,
            "batch": batch,
            "events": encode_json(list(events)),
            "now": now,
            "notify": not notify_after_commit,
        },
    )
    if notify_after_commit:
        await notify_run_events(conn, run_id, int(value))
    return int(value)


async def run_retry(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    *,
    error_type: str,
    error_message: str,
    now: datetime | None = None,
    notify_after_commit: bool = False,
) -> Run:
    """After an error that is not the run's own (a lost database connection): the run
    goes back to ``pending`` for another attempt if the agent's retry budget allows,
    else it fails with ``error_type`` (a cancel_requested run is cancelled).

    ``notify_after_commit``: as for ``run_finish`` (a failed or cancelled run wrote its
    `end` event)."""
    run = await call_one(
        conn,
        Run,
        "yuxi.run_retry(p_run_id => %(run_id)s, p_token => %(token)s,"
        " p_error_type => %(error_type)s, p_error_message => %(error_message)s,"
        " p_now => %(now)s, p_notify => %(notify)s)",
        {
            "run_id": run_id,
            "token": token,
            "error_type": error_type,
            "error_message": error_message,
            "now": now,
            "notify": not notify_after_commit,
        },
    )
    if notify_after_commit and run.status != "pending":
        await notify_run_events(conn, run.run_id, run.last_event_seq)
    return run


async def run_redeliver_stalled(
    conn: AsyncConnection[Any],
    *,
    stalled_seconds: float = 30.0,
    limit: int = 100,
    now: datetime | None = None,
) -> list[RedeliveredRun]:
    """Re-delivers pending runs whose delivery job is held by a procrastinate worker
    with no heartbeat for ``stalled_seconds``."""
    return await call_many(
        conn,
        RedeliveredRun,
        "yuxi.run_redeliver_stalled(p_stalled_seconds => %(stalled)s, p_limit => %(limit)s,"
        " p_now => %(now)s)",
        {"stalled": stalled_seconds, "limit": limit, "now": now},
    )


async def delivery_prune(
    conn: AsyncConnection[Any],
    *,
    stalled_seconds: float = 30.0,
    limit: int = 1000,
    now: datetime | None = None,
) -> int:
    """Deletes the procrastinate jobs of yuxi's queues that have done their work; how many."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.delivery_prune(p_stalled_seconds => %(stalled)s, p_limit => %(limit)s,"
        " p_now => %(now)s)",
        {"stalled": stalled_seconds, "limit": limit, "now": now},
    )
    return int(value)
