"""Metrics (``yuxi.metrics_snapshot``): what the database says about the queue at scrape
time, for GET /metrics."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.calls import call_many


class MetricSample(msgspec.Struct, frozen=True):
    """One sample: ``metric`` is its exposed name (a counter's ends in ``_total``),
    ``type`` is ``gauge`` or ``counter``, ``help`` says what it counts."""

    metric: str
    type: str
    help: str
    labels: dict[str, str]
    value: float


async def metrics_snapshot(
    conn: AsyncConnection[Any], *, now: datetime | None = None
) -> list[MetricSample]:
    """Every database-derived metric, in one round trip (cheap: it reads only the
    partial indexes of what is in flight)."""
    return await call_many(
        conn, MetricSample, "yuxi.metrics_snapshot(p_now => %(now)s)", {"now": now}
    )
