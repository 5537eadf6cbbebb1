"""Scheduled jobs (``yuxi.job_*``): the wrappers the API, the ticker and operators'
scripts use. Cron is validated and next fire times computed here; everything stored
goes through SQL functions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.calls import call_many, call_one, call_scalar
from yuxi.scheduling.cron import next_fire, validate


class Job(msgspec.Struct, frozen=True):
    """A scheduled job as its owner sees it (the API's response body too)."""

    id: UUID
    project_id: UUID | None
    agent_slug: str
    prompt: str
    cron: str
    timezone: str
    tool_approval_mode: str
    enabled: bool
    next_fire_at: datetime
    last_fired_at: datetime | None
    created_at: datetime
    updated_at: datetime


class Occurrence(msgspec.Struct, frozen=True):
    """One fire of a job (``yuxi.occurrence_info``)."""

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


_SETTINGS = (
    "p_project_id => %(project_id)s, p_agent_slug => %(agent_slug)s, p_prompt => %(prompt)s,"
    " p_tool_approval_mode => %(tool_approval_mode)s, p_cron => %(cron)s,"
    " p_timezone => %(timezone)s, p_enabled => %(enabled)s, p_next_fire_at => %(next_fire_at)s"
)


def _settings(settings: JobSettings, now: datetime | None) -> dict[str, Any]:
    """The settings as parameters, with the next fire time after ``now``; CronError for
    a bad cron or zone."""
    validate(settings.cron, settings.timezone)
    return {name: getattr(settings, name) for name in JobSettings.__struct_fields__} | {
        "next_fire_at": next_fire(settings.cron, settings.timezone, now or datetime.now(UTC))
    }


async def job_create(
    conn: AsyncConnection[Any], uid: UUID, settings: JobSettings, *, now: datetime | None = None
) -> Job:
    """Validates the cron and zone (CronError), then creates the job (NotFound for a
    project or agent the user cannot use)."""
    return await call_one(
        conn,
        Job,
        f"yuxi.job_create(p_uid => %(uid)s, {_SETTINGS})",
        {"uid": uid} | _settings(settings, now),
    )


async def job_get(conn: AsyncConnection[Any], uid: UUID, job_id: UUID) -> Job:
    """The user's live job (NotFound otherwise)."""
    return await call_one(
        conn,
        Job,
        "yuxi.job_get(p_uid => %(uid)s, p_job_id => %(job_id)s)",
        {"uid": uid, "job_id": job_id},
    )


async def job_list(conn: AsyncConnection[Any], uid: UUID) -> list[Job]:
    """The user's live jobs, oldest first."""
    return await call_many(conn, Job, "yuxi.job_list(p_uid => %(uid)s)", {"uid": uid})


async def job_update(
    conn: AsyncConnection[Any],
    uid: UUID,
    job_id: UUID,
    settings: JobSettings,
    *,
    now: datetime | None = None,
) -> Job:
    """Replaces the job's settings; the next fire time is recomputed from now."""
    return await call_one(
        conn,
        Job,
        f"yuxi.job_update(p_uid => %(uid)s, p_job_id => %(job_id)s, {_SETTINGS})",
        {"uid": uid, "job_id": job_id} | _settings(settings, now),
    )


async def job_delete(conn: AsyncConnection[Any], uid: UUID, job_id: UUID) -> None:
    await call_scalar(
        conn,
        "SELECT yuxi.job_delete(p_uid => %(uid)s, p_job_id => %(job_id)s)",
        {"uid": uid, "job_id": job_id},
    )


async def job_fire(
    conn: AsyncConnection[Any],
    job_id: UUID,
    *,
    trigger: str,
    scheduled_for: datetime | None = None,
    next_fire_at: datetime | None = None,
    uid: UUID | None = None,
) -> Occurrence:
    """Fires one slot of the job through the Request/Run path: ``trigger`` ``schedule``
    (the ticker, which also moves ``next_fire_at`` on) or ``manual`` (run now, as
    ``uid``, at ``scheduled_for`` or now)."""
    return await call_one(
        conn,
        Occurrence,
        "yuxi.job_fire(p_job_id => %(job_id)s, p_trigger => %(trigger)s,"
        " p_scheduled_for => %(scheduled_for)s, p_next_fire_at => %(next_fire_at)s,"
        " p_uid => %(uid)s)",
        {
            "job_id": job_id,
            "trigger": trigger,
            "scheduled_for": scheduled_for or datetime.now(UTC),
            "next_fire_at": next_fire_at,
            "uid": uid,
        },
    )


async def job_occurrences(
    conn: AsyncConnection[Any], uid: UUID, job_id: UUID, *, limit: int = 100
) -> list[Occurrence]:
    """Newest first."""
    return await call_many(
        conn,
        Occurrence,
        "yuxi.job_occurrences(p_uid => %(uid)s, p_job_id => %(job_id)s, p_limit => %(limit)s)",
        {"uid": uid, "job_id": job_id, "limit": limit},
    )


async def jobs_due(conn: AsyncConnection[Any], now: datetime, *, limit: int = 100) -> list[Job]:
    """Locks (SKIP LOCKED) up to ``limit`` enabled jobs due at ``now``; inside a
    transaction, which keeps them locked."""
    return await call_many(
        conn,
        Job,
        "yuxi.jobs_due(p_now => %(now)s, p_limit => %(limit)s)",
        {"now": now, "limit": limit},
    )


async def job_mark_retry(
    conn: AsyncConnection[Any], job_id: UUID, scheduled_for: datetime, error: str
) -> None:
    """Records that firing the slot failed for an unknown reason; next tick tries again."""
    await call_scalar(
        conn,
        "SELECT yuxi.job_mark_retry(p_job_id => %(job_id)s,"
        " p_scheduled_for => %(scheduled_for)s, p_error => %(error)s)",
        {"job_id": job_id, "scheduled_for": scheduled_for, "error": error},
    )


async def job_disable_invalid(
    conn: AsyncConnection[Any], job_id: UUID, scheduled_for: datetime, error: str
) -> None:
    """Disables a job whose cron or zone no longer parses, recording why."""
    await call_scalar(
        conn,
        "SELECT yuxi.job_disable_invalid(p_job_id => %(job_id)s,"
        " p_scheduled_for => %(scheduled_for)s, p_error => %(error)s)",
        {"job_id": job_id, "scheduled_for": scheduled_for, "error": error},
    )
