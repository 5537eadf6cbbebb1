"""Requests: submit, steer, cancel, read; and a thread's queue."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from yuxi.queue.calls import call_many, call_one, call_scalar
from yuxi.queue.models import RequestInfo, ThreadQueue


async def submit_request(
    conn: AsyncConnection[Any],
    *,
    uid: UUID | None,
    thread_id: UUID,
    query: str,
    request_id: str | None = None,
    queue_policy: str = "enqueue",
    model_spec: str | None = None,
    tool_approval_mode: str | None = None,
    source: str = "api",
) -> RequestInfo:
    """The one submit path (``yuxi.request_submit``): stores the message and the request
    and, when the thread is ready, dispatches the queue head in the same transaction."""
    return await call_one(
        conn,
        RequestInfo,
        "yuxi.request_submit(%(uid)s, %(thread_id)s, %(query)s, %(request_id)s, %(queue_policy)s,"
        " %(model_spec)s, %(tool_approval_mode)s, %(source)s)",
        {
            "uid": uid,
            "thread_id": thread_id,
            "query": query,
            "request_id": request_id,
            "queue_policy": queue_policy,
            "model_spec": model_spec,
            "tool_approval_mode": tool_approval_mode,
            "source": source,
        },
    )


async def get_request(
    conn: AsyncConnection[Any], request_id: str, *, uid: UUID | None = None
) -> RequestInfo:
    return await call_one(
        conn, RequestInfo, "yuxi.request_get(%(id)s, %(uid)s)", {"id": request_id, "uid": uid}
    )


async def steer_request(
    conn: AsyncConnection[Any], request_id: str, *, uid: UUID | None = None
) -> RequestInfo:
    """Upgrades a queued enqueue request to steer (same identity; it runs next)."""
    return await call_one(
        conn, RequestInfo, "yuxi.request_steer(%(id)s, %(uid)s)", {"id": request_id, "uid": uid}
    )


async def cancel_request(
    conn: AsyncConnection[Any], request_id: str, *, uid: UUID | None = None
) -> RequestInfo:
    """Cancels a request that is still queued."""
    return await call_one(
        conn, RequestInfo, "yuxi.request_cancel(%(id)s, %(uid)s)", {"id": request_id, "uid": uid}
    )


async def continue_thread(
    conn: AsyncConnection[Any], thread_id: UUID, *, uid: UUID | None = None
) -> UUID | None:
    """Resumes a paused backlog; returns the run dispatched (None for an empty queue)."""
    value = await call_scalar(
        conn, "SELECT yuxi.thread_continue(%(t)s, %(uid)s)", {"t": thread_id, "uid": uid}
    )
    return value if value is None else UUID(str(value))


async def thread_queue(conn: AsyncConnection[Any], thread_id: UUID) -> ThreadQueue | None:
    """The thread's row of ``yuxi.thread_queues`` (None for an unknown or deleted thread)."""
    rows = await call_many(
        conn, ThreadQueue, "yuxi.thread_queues WHERE thread_id = %(t)s", {"t": thread_id}
    )
    return rows[0] if rows else None
