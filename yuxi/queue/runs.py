"""Runs: claim under a lease, renew, write the manifest, finish, release, cancel, resume."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from yuxi.queue.calls import call_one, call_scalar, encode_json
from yuxi.queue.events import notify_run_events
from yuxi.queue.models import (
    ClaimedRun,
    LeaseState,
    ManifestCommit,
    OutputMessage,
    RequestInfo,
    Run,
    RunEvent,
)


async def claim_run(
    conn: AsyncConnection[Any],
    run_id: UUID,
    *,
    worker: str,
    lease_seconds: float,
    now: datetime | None = None,
) -> ClaimedRun:
    """Takes a pending run: a new attempt and lease token. RunNotClaimable otherwise."""
    return await call_one(
        conn,
        ClaimedRun,
        "yuxi.run_claim(%(r)s, %(w)s, %(l)s, %(now)s)",
        {"r": run_id, "w": worker, "l": lease_seconds, "now": now},
    )


async def renew_lease(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    *,
    lease_seconds: float,
    now: datetime | None = None,
) -> LeaseState:
    """Extends the lease; the returned status tells the holder of a cancel request."""
    return await call_one(
        conn,
        LeaseState,
        "yuxi.run_renew_lease(%(r)s, %(t)s, %(l)s, %(now)s)",
        {"r": run_id, "t": token, "l": lease_seconds, "now": now},
    )


async def write_manifest(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    *,
    manifest: dict[str, Any],
    fingerprint: str,
    now: datetime | None = None,
) -> str:
    """Stores the manifest once; ManifestConflict when a different one is already there."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.run_write_manifest(%(r)s, %(t)s, %(m)s::jsonb, %(f)s, %(now)s)",
        {"r": run_id, "t": token, "m": encode_json(manifest), "f": fingerprint, "now": now},
    )
    return str(value)


async def commit_manifest(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    *,
    manifest: dict[str, Any],
    fingerprint: str,
) -> ManifestCommit:
    """``write_manifest``, then the run's identity as it stands now, in one call."""
    return await call_one(
        conn,
        ManifestCommit,
        "yuxi.run_commit_manifest(%(r)s, %(t)s, %(m)s::jsonb, %(f)s)",
        {"r": run_id, "t": token, "m": encode_json(manifest), "f": fingerprint},
    )


async def finish_run(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    *,
    status: str,
    messages: Sequence[OutputMessage] = (),
    error_type: str | None = None,
    error_message: str | None = None,
    now: datetime | None = None,
    notify_after_commit: bool = False,
    events: Sequence[RunEvent] = (),
) -> Run:
    """Ends the run, stores its output messages, appends its last ``events`` and its
    `end` event and moves the thread's queue on (next dispatch, or pause), all in one
    transaction.

    ``notify_after_commit``: as for ``append_events``."""
    run = await call_one(
        conn,
        Run,
        "yuxi.run_finish(%(r)s, %(t)s, %(s)s, %(m)s::jsonb, %(et)s, %(em)s, %(now)s, %(n)s,"
        " %(ev)s::jsonb)",
        {
            "r": run_id,
            "t": token,
            "s": status,
            "m": encode_json(list(messages)),
            "et": error_type,
            "em": error_message,
            "now": now,
            "n": not notify_after_commit,
            "ev": encode_json(list(events)),
        },
    )
    if notify_after_commit:
        await notify_run_events(conn, run.run_id, run.last_event_seq)
    return run


async def release_run(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    *,
    reason: str | None = None,
    now: datetime | None = None,
) -> Run:
    """Gives the run back for another attempt (cancelled instead if cancel was requested)."""
    return await call_one(
        conn,
        Run,
        "yuxi.run_release(%(r)s, %(t)s, %(why)s, %(now)s)",
        {"r": run_id, "t": token, "why": reason, "now": now},
    )


async def request_cancel(
    conn: AsyncConnection[Any],
    run_id: UUID,
    *,
    uid: UUID | None = None,
    now: datetime | None = None,
) -> str:
    """Cancels a pending or interrupted run at once, or marks a running one
    cancel_requested (its child runs too); returns the run's status after."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.run_request_cancel(%(r)s, %(uid)s, %(now)s)",
        {"r": run_id, "uid": uid, "now": now},
    )
    return str(value)


async def resume_run(
    conn: AsyncConnection[Any],
    run_id: UUID,
    *,
    resume: Any,
    uid: UUID | None = None,
    request_id: str | None = None,
) -> RequestInfo:
    """Creates (once) the resume run of the thread's latest, interrupted run."""
    return await call_one(
        conn,
        RequestInfo,
        "yuxi.run_resume(%(r)s, %(v)s::jsonb, %(uid)s, %(req)s)",
        {"r": run_id, "v": encode_json(resume), "uid": uid, "req": request_id},
    )


async def create_subagent_run(
    conn: AsyncConnection[Any],
    parent_run_id: UUID,
    token: UUID,
    *,
    agent_slug: str,
    run_input: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> UUID:
    """Creates a child run on behalf of the parent's lease holder."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.run_create_subagent(%(p)s, %(t)s, %(a)s, %(i)s::jsonb, %(now)s)",
        {
            "p": parent_run_id,
            "t": token,
            "a": agent_slug,
            "i": encode_json(run_input or {}),
            "now": now,
        },
    )
    return UUID(str(value))


async def get_run(conn: AsyncConnection[Any], run_id: UUID, *, uid: UUID | None = None) -> Run:
    return await call_one(conn, Run, "yuxi.run_get(%(r)s, %(uid)s)", {"r": run_id, "uid": uid})
