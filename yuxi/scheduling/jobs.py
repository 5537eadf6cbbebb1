"""Scheduled jobs: the service the API (and operators' scripts) use. Cron is validated
and next fire times computed here; everything stored goes through SQL functions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.calls import call_many, call_one, call_scalar
from yuxi.queue.errors import NotFound
from yuxi.scheduling.cron import next_fire, validate


class Job(msgspec.Struct, frozen=True):
    id: UUID
    uid: UUID
    project_id: UUID | None
    agent_slug: str
    prompt: str
    tool_approval_mode: str
    cron: str
    timezone: str
    enabled: bool
    next_fire_at: datetime
    last_fired_at: datetime | None
    created_at: datetime
    updated_at: datetime


class Occurrence(msgspec.Struct, frozen=True):
    id: UUID
    job_id: UUID
    scheduled_for: datetime
    trigger: str
    status: str
    thread_id: UUID | None
    request_id: str | None
    run_id: UUID | None
    run_status: str | None
    error: str | None
    created_at: datetime


class JobSettings(msgspec.Struct, frozen=True):
    project_id: UUID
    agent_slug: str
    prompt: str
    cron: str
    timezone: str
    tool_approval_mode: str = "auto"
    enabled: bool = True


_JOB_SOURCE = "yuxi.scheduled_agent_jobs WHERE id = %(j)s AND uid = %(u)s AND deleted_at IS NULL"


def _now(now: datetime | None) -> datetime:
    return now or datetime.now(UTC)


async def create_job(
    conn: AsyncConnection[Any], uid: UUID, settings: JobSettings, *, now: datetime | None = None
) -> Job:
    """Validates the cron and zone (CronError), then creates the job (NotFound for a
    project or agent the user cannot use)."""
    validate(settings.cron, settings.timezone)
    return await call_one(
        conn,
        Job,
        "yuxi.job_create(%(u)s, %(p)s, %(a)s, %(pr)s, %(m)s, %(c)s, %(z)s, %(e)s, %(n)s)",
        {
            "u": uid,
            "p": settings.project_id,
            "a": settings.agent_slug,
            "pr": settings.prompt,
            "m": settings.tool_approval_mode,
            "c": settings.cron,
            "z": settings.timezone,
            "e": settings.enabled,
            "n": next_fire(settings.cron, settings.timezone, _now(now)),
        },
    )


async def get_job(conn: AsyncConnection[Any], uid: UUID, job_id: UUID) -> Job:
    jobs = await call_many(conn, Job, _JOB_SOURCE, {"j": job_id, "u": uid})
    if not jobs:
        raise NotFound(f"scheduled job {job_id} not found")
    return jobs[0]


async def list_jobs(conn: AsyncConnection[Any], uid: UUID) -> list[Job]:
    return await call_many(
        conn,
        Job,
        "yuxi.scheduled_agent_jobs WHERE uid = %(u)s AND deleted_at IS NULL"
        " ORDER BY created_at, id",
        {"u": uid},
    )


async def update_job(
    conn: AsyncConnection[Any],
    uid: UUID,
    job_id: UUID,
    settings: JobSettings,
    *,
    now: datetime | None = None,
) -> Job:
    """Replaces the job's settings; the next fire time is recomputed from now."""
    validate(settings.cron, settings.timezone)
    return await call_one(
        conn,
        Job,
        "yuxi.job_update(%(u)s, %(j)s, %(p)s, %(a)s, %(pr)s, %(m)s, %(c)s, %(z)s, %(e)s, %(n)s)",
        {
            "u": uid,
            "j": job_id,
            "p": settings.project_id,
            "a": settings.agent_slug,
            "pr": settings.prompt,
            "m": settings.tool_approval_mode,
            "c": settings.cron,
            "z": settings.timezone,
            "e": settings.enabled,
            "n": next_fire(settings.cron, settings.timezone, _now(now)),
        },
    )


async def delete_job(conn: AsyncConnection[Any], uid: UUID, job_id: UUID) -> None:
    await call_scalar(conn, "SELECT yuxi.job_delete(%(u)s, %(j)s)", {"u": uid, "j": job_id})


async def run_now(
    conn: AsyncConnection[Any], uid: UUID, job_id: UUID, *, now: datetime | None = None
) -> Occurrence:
    """Fires the job immediately through the same path as the ticker (trigger manual)."""
    return await call_one(
        conn,
        Occurrence,
        "yuxi.job_fire(%(j)s, 'manual', %(t)s, NULL, %(u)s)",
        {"j": job_id, "t": _now(now), "u": uid},
    )


async def occurrences(
    conn: AsyncConnection[Any], uid: UUID, job_id: UUID, *, limit: int = 100
) -> list[Occurrence]:
    """Newest first."""
    return await call_many(
        conn,
        Occurrence,
        "yuxi.job_occurrences(%(u)s, %(j)s, %(l)s)",
        {"u": uid, "j": job_id, "l": limit},
    )
