"""The queue's maintenance passes (``yuxi.run_reconcile_expired``,
``yuxi.run_redeliver_orphans``): expired leases and undelivered runs."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.calls import call_many, call_scalar


class ReconciledRun(msgspec.Struct, frozen=True):
    run_id: UUID
    status: str


class RedeliveredRun(msgspec.Struct, frozen=True):
    run_id: UUID
    job_id: int


async def run_reconcile_expired(
    conn: AsyncConnection[Any],
    *,
    now: datetime | None = None,
    limit: int = 100,
    infra_limit: int = 3,
) -> list[ReconciledRun]:
    """Ends (or, with infrastructure retries left, gives back) runs whose worker stopped
    renewing."""
    return await call_many(
        conn,
        ReconciledRun,
        "yuxi.run_reconcile_expired(p_now => %(now)s, p_limit => %(limit)s,"
        " p_infra_limit => %(infra)s)",
        {"now": now, "limit": limit, "infra": infra_limit},
    )


async def run_redeliver_orphans(
    conn: AsyncConnection[Any], *, limit: int = 100
) -> list[RedeliveredRun]:
    """Re-delivers pending runs whose delivery job is gone."""
    return await call_many(
        conn,
        RedeliveredRun,
        "yuxi.run_redeliver_orphans(p_limit => %(limit)s)",
        {"limit": limit},
    )


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
