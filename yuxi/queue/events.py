"""Run events (``yuxi.run_append_events``, ``yuxi.run_events_after``,
``yuxi.run_end_event``): the durable, gap-free log SSE clients read and resume from."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.callers import Bearer
from yuxi.queue.calls import call_many, call_scalar, encode_json

# NOTIFY payload: "<run_id> <last seq>", then, when a worker announces them after their
# commit, "\n<seq>\t<event>\t<payload JSON>" for each event it carries
# (yuxi.run_events_announce)
EVENTS_CHANNEL = "yuxi_run_events"
CANCEL_CHANNEL = "yuxi_run_cancel"  # NOTIFY payload: "<run_id>"


class RunEvent(msgspec.Struct, frozen=True):
    """An event to append: its name and JSON payload."""

    event: str
    payload: dict[str, Any] = {}


class StoredEvent(msgspec.Struct, frozen=True):
    """An event as stored, with its seq."""

    seq: int
    event: str
    payload: dict[str, Any]
    created_at: datetime


async def run_append_events(
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
        "SELECT yuxi.run_append_events(p_run_id => %(run_id)s, p_token => %(token)s,"
        " p_events => %(events)s::jsonb, p_now => %(now)s, p_notify => %(notify)s)",
        {
            "run_id": run_id,
            "token": token,
            "events": encode_json(list(events)),
            "now": now,
            "notify": not notify_after_commit,
        },
    )
    if notify_after_commit:
        await notify_run_events(conn, run_id, int(value), int(value) - len(events) + 1)
    return int(value)


async def notify_run_events(
    conn: AsyncConnection[Any],
    run_id: UUID,
    seq: int,
    first: int | None = None,
    announce_from: int | None = None,
) -> None:
    """Tells listeners that ``run_id`` has events up to ``seq`` (on its own, after commit),
    carrying the events from ``first`` on, or from ``announce_from`` when that is
    earlier (events committed before without a notification), as far as a notification
    holds them (``yuxi.run_events_announce``): the streams that sent everything before
    them need not read them."""
    if not conn.autocommit:
        raise RuntimeError("notify after commit needs an autocommit connection")
    if announce_from is not None:
        first = announce_from if first is None else min(first, announce_from)
    await conn.execute("SELECT yuxi.run_events_announce(%s, %s, %s)", (run_id, seq, first))


async def run_events_after(
    conn: AsyncConnection[Any], run_id: UUID, after: int, limit: int = 1000
) -> list[StoredEvent]:
    """The run's events with seq > ``after``, in order, at most ``limit``."""
    return await call_many(
        conn,
        StoredEvent,
        "yuxi.run_events_after(p_run_id => %(run_id)s, p_after => %(after)s, p_limit => %(limit)s)",
        {"run_id": run_id, "after": after, "limit": limit},
    )


class StreamRead(msgspec.Struct, frozen=True):
    """A row of ``yuxi.run_stream_read``: an event (``seq`` None: none after the seq
    asked for) with its payload as JSON text, and the run's status in the same
    snapshot."""

    seq: int | None
    event: str | None
    payload: str | None
    run_status: str
    last_event_seq: int


async def run_stream_read(
    conn: AsyncConnection[Any], run_id: UUID, after: int, limit: int = 1000
) -> list[StreamRead]:
    """The run's events after ``after`` with its status, read together (no row: no such
    run)."""
    return await call_many(
        conn,
        StreamRead,
        "yuxi.run_stream_read(p_run_id => %(run_id)s, p_after => %(after)s, p_limit => %(limit)s)",
        {"run_id": run_id, "after": after, "limit": limit},
    )


async def run_stream_open(
    conn: AsyncConnection[Any],
    run_id: UUID,
    *,
    uid: UUID | Bearer | None,
    after: int,
    limit: int = 1000,
    init: bool = True,
) -> list[StreamRead]:
    """A stream's first read (``yuxi.run_stream_open``): with ``init`` the ``init`` row
    (seq 0) first, then ``run_stream_read``'s rows, in one snapshot; NotFound for a run
    that is not ``uid``'s."""
    return await call_many(
        conn,
        StreamRead,
        "yuxi.run_stream_open(p_run_id => %(run_id)s, p_uid => %(uid)s, p_after => %(after)s,"
        " p_limit => %(limit)s, p_init => %(init)s)",
        {"run_id": run_id, "uid": uid, "after": after, "limit": limit, "init": init},
    )


async def run_end_event(conn: AsyncConnection[Any], run_id: UUID) -> StoredEvent | None:
    """The run's `end` event, once it has one."""
    rows = await call_many(
        conn, StoredEvent, "yuxi.run_end_event(p_run_id => %(run_id)s)", {"run_id": run_id}
    )
    return rows[0] if rows else None


async def run_append_batch(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    batch: int,
    events: Sequence[RunEvent],
    *,
    now: datetime | None = None,
    notify_after_commit: bool = False,
    announce_from: int | None = None,
) -> int:
    """Appends the attempt's event batch number ``batch`` (1, 2, ... per attempt) as the
    lease holder; a batch already stored is skipped, so re-sending one whose reply was
    lost stores nothing twice. Returns the run's last seq.

    ``notify_after_commit``: as for ``run_append_events``; the notification carries the
    batch's events, and those from ``announce_from`` on (events committed before without
    a notification)."""
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
        first = int(value) - len(events) + 1
        await notify_run_events(conn, run_id, int(value), first, announce_from)
    return int(value)
