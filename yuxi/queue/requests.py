"""Requests (``yuxi.request_*``): submit, read, steer, cancel."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.callers import Bearer
from yuxi.queue.calls import call_one


class RequestInfo(msgspec.Struct, frozen=True):
    """The request view (``yuxi.request_info``): where a submitted message stands."""

    request_id: str
    thread_id: UUID
    status: str
    queue_policy: str
    queue_position: int | None
    message_id: int | None
    run_id: UUID | None
    created_at: datetime


async def request_submit(
    conn: AsyncConnection[Any],
    *,
    uid: UUID | Bearer | None,
    thread_id: UUID,
    query: str,
    request_id: str | None = None,
    queue_policy: str = "enqueue",
    model_spec: str | None = None,
    tool_approval_mode: str | None = None,
    source: str = "api",
) -> RequestInfo:
    """The one submit path: stores the message and the request and, when the thread is
    ready, dispatches the queue head in the same transaction."""
    return await call_one(
        conn,
        RequestInfo,
        "yuxi.request_submit(p_uid => %(uid)s, p_thread_id => %(thread_id)s,"
        " p_query => %(query)s, p_request_id => %(request_id)s,"
        " p_queue_policy => %(queue_policy)s, p_model_spec => %(model_spec)s,"
        " p_tool_approval_mode => %(tool_approval_mode)s, p_source => %(source)s)",
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


def _by_id(function: str) -> str:
    return f"yuxi.{function}(p_request_id => %(request_id)s, p_uid => %(uid)s)"


async def request_get(
    conn: AsyncConnection[Any], request_id: str, *, uid: UUID | None = None
) -> RequestInfo:
    return await call_one(
        conn, RequestInfo, _by_id("request_get"), {"request_id": request_id, "uid": uid}
    )


async def request_steer(
    conn: AsyncConnection[Any], request_id: str, *, uid: UUID | None = None
) -> RequestInfo:
    """Upgrades a queued enqueue request to steer (same identity; it runs next)."""
    return await call_one(
        conn, RequestInfo, _by_id("request_steer"), {"request_id": request_id, "uid": uid}
    )


async def request_cancel(
    conn: AsyncConnection[Any], request_id: str, *, uid: UUID | None = None
) -> RequestInfo:
    """Cancels a request that is still queued."""
    return await call_one(
        conn, RequestInfo, _by_id("request_cancel"), {"request_id": request_id, "uid": uid}
    )
