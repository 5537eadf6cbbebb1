"""Token usage: the caller's per day and model (admins: everyone's), and a thread's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any
from uuid import UUID

import msgspec
from litestar import Controller, get
from litestar.di import NamedDependency
from litestar.params import FromPath, Parameter, QueryParameter
from psycopg import AsyncConnection

from yuxi.api.auth import User, require_admin
from yuxi.queue.errors import InvalidInput
from yuxi.queue.usage import thread_usage, usage_report

Conn = NamedDependency[AsyncConnection[Any]]


class UsageEntry(msgspec.Struct, frozen=True):
    uid: UUID
    day: str
    model: str
    runs: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    total_tokens: int
    cost: float | None


class UsageReport(msgspec.Struct, frozen=True):
    since: datetime
    until: datetime
    usage: list[UsageEntry]


class UsageController(Controller):
    path = "/api"
    tags = ("usage",)

    @get("/usage", summary="Tokens and cost per UTC day and model (admins: all users)")
    async def report(
        self,
        conn: Conn,
        user: NamedDependency[User],
        since: Annotated[datetime | None, Parameter(description="default: 30 days ago")] = None,
        until: Annotated[datetime | None, Parameter(description="default: now")] = None,
        all_users: Annotated[
            bool, QueryParameter(name="all", description="admins: every user's usage")
        ] = False,
    ) -> UsageReport:
        if all_users:
            require_admin(user, "see every user's usage")
        now = datetime.now(UTC)
        end = _aware(until) if until else now + timedelta(seconds=1)
        start = _aware(since) if since else now - timedelta(days=30)
        if start >= end:
            raise InvalidInput("since must be before until")
        rows = await usage_report(conn, None if all_users else user.uid, start, end)
        return UsageReport(
            start,
            end,
            [
                UsageEntry(
                    r.uid,
                    r.day.isoformat(),
                    r.model,
                    r.runs,
                    r.input_tokens,
                    r.output_tokens,
                    r.cached_tokens,
                    r.reasoning_tokens,
                    r.total_tokens,
                    None if r.cost is None else float(r.cost),
                )
                for r in rows
            ],
        )

    @get("/agent/threads/{thread_id:uuid}/usage", summary="A thread's usage, per model")
    async def thread(
        self, conn: Conn, user: NamedDependency[User], thread_id: FromPath[UUID]
    ) -> dict[str, Any]:
        return await thread_usage(conn, user.uid, thread_id)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)
