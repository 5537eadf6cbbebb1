"""The queue's maintenance passes: expired leases and undelivered runs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg import AsyncConnection

from yuxi.queue.calls import call_many
from yuxi.queue.models import ReconciledRun, RedeliveredRun


async def reconcile_expired_leases(
    conn: AsyncConnection[Any], *, now: datetime | None = None, limit: int = 100
) -> list[ReconciledRun]:
    """Ends (or, with attempts left, releases) runs whose worker stopped renewing."""
    return await call_many(
        conn, ReconciledRun, "yuxi.run_reconcile_expired(%(now)s, %(l)s)", {"now": now, "l": limit}
    )


async def redeliver_orphans(
    conn: AsyncConnection[Any], *, limit: int = 100
) -> list[RedeliveredRun]:
    """Re-delivers pending runs whose delivery job is gone."""
    return await call_many(conn, RedeliveredRun, "yuxi.run_redeliver_orphans(%(l)s)", {"l": limit})
