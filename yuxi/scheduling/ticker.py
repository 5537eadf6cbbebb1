"""The schedule ticker: fires every due job once per slot.

Each tick takes a batch of due jobs with FOR UPDATE SKIP LOCKED (so tickers in many
workers share the work without overlap) and, per job, in its own savepoint: coalesces
the missed slots into one fire at the job's due slot, records the occurrence (submitted,
skipped or failed) and moves next_fire_at to the first slot after now. An unexpected
error in one job rolls back that job only and leaves its slot for the next tick.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.statuses import OccurrenceStatus
from yuxi.scheduling.cron import CronError, next_fire
from yuxi.scheduling.jobs import job_disable_invalid, job_fire, job_mark_retry, jobs_due

log = logging.getLogger("yuxi.scheduling")


class TickResult(msgspec.Struct):
    fired: int = 0
    skipped: int = 0
    failed: int = 0
    retry: int = 0

    @property
    def handled(self) -> int:
        return self.fired + self.skipped + self.failed + self.retry


async def tick(
    conn: AsyncConnection[Any], *, now: datetime | None = None, batch: int = 100
) -> TickResult:
    """One batch of due jobs in one transaction. ``conn`` must not be in a transaction."""
    now = now or datetime.now(UTC)
    result = TickResult()
    async with conn.transaction():
        jobs = await jobs_due(conn, now, limit=batch)
        for job in jobs:
            try:
                following = next_fire(job.cron, job.timezone, now)
            except CronError as error:  # edited by hand, or the zone went away
                log.error("job %s: %s; disabling it", job.id, error)
                await job_disable_invalid(conn, job.id, job.next_fire_at, str(error))
                result.failed += 1
                continue
            try:
                async with conn.transaction():
                    occurrence = await job_fire(
                        conn,
                        job.id,
                        trigger="schedule",
                        scheduled_for=job.next_fire_at,
                        next_fire_at=following,
                    )
            except Exception as error:
                log.exception(
                    "job %s: firing the slot at %s failed; retrying next tick",
                    job.id,
                    job.next_fire_at,
                )
                async with conn.transaction():
                    await job_mark_retry(
                        conn, job.id, job.next_fire_at, f"{type(error).__name__}: {error}"
                    )
                result.retry += 1
                continue
            if occurrence.status == OccurrenceStatus.SUBMITTED:
                result.fired += 1
            elif occurrence.status == OccurrenceStatus.SKIPPED:
                result.skipped += 1
            else:
                result.failed += 1
    return result


async def tick_until_idle(
    conn: AsyncConnection[Any],
    *,
    now: datetime | None = None,
    batch: int = 100,
    max_batches: int = 1000,
) -> TickResult:
    """Ticks until no due job is left, only ones that keep failing remain, or
    ``max_batches`` batches were handled (the next periodic tick goes on from there)."""
    total = TickResult()
    for _ in range(max_batches):
        step = await tick(conn, now=now, batch=batch)
        total.fired += step.fired
        total.skipped += step.skipped
        total.failed += step.failed
        total.retry += step.retry
        if step.handled == 0 or step.handled == step.retry:
            break
    return total
