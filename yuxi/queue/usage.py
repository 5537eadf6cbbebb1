"""Token usage (``yuxi.usage_report``, ``yuxi.thread_usage``): what runs spent."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.calls import call_many, call_scalar


class UsageRow(msgspec.Struct, frozen=True):
    """A row of ``yuxi.usage_report``: one user's usage of one model on one UTC day."""

    uid: UUID
    day: date
    model: str
    runs: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    total_tokens: int
    cost: Decimal | None


async def usage_report(
    conn: AsyncConnection[Any], uid: UUID | None, since: datetime, until: datetime
) -> list[UsageRow]:
    """Per user, day and model; everyone's with ``uid`` None."""
    return await call_many(
        conn,
        UsageRow,
        "yuxi.usage_report(p_uid => %(uid)s, p_since => %(since)s, p_until => %(until)s)",
        {"uid": uid, "since": since, "until": until},
    )


async def thread_usage(conn: AsyncConnection[Any], uid: UUID, thread_id: UUID) -> dict[str, Any]:
    value = await call_scalar(
        conn,
        "SELECT yuxi.thread_usage(p_uid => %(uid)s, p_thread_id => %(thread_id)s)",
        {"uid": uid, "thread_id": thread_id},
    )
    return dict(value)
