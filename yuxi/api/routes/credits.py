"""Budgets: the caller's credit balance and ledger; admins read and top up anyone's."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any
from uuid import UUID

import msgspec
from litestar import Controller, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, Parameter
from psycopg import AsyncConnection

from yuxi.api.auth import User, require_admin
from yuxi.queue.credits import credit_add, credit_report

Conn = NamedDependency[AsyncConnection[Any]]


class LedgerEntry(msgspec.Struct, frozen=True):
    id: int
    kind: str  # topup, adjust, freeze, release, charge
    delta: Decimal
    balance_after: Decimal
    run_id: UUID | None
    actor_uid: UUID | None
    reason: str | None
    created_at: datetime


class Credits(msgspec.Struct, frozen=True):
    """A user's budget. ``budget`` false: the user has none and is never stopped."""

    budget: bool
    balance: Decimal | None = None
    frozen: Decimal = Decimal(0)
    ledger: list[LedgerEntry] = msgspec.field(default_factory=list)


class CreditChange(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``amount`` > 0 tops up, < 0 lowers the balance (never below 0)."""

    amount: Annotated[Decimal, msgspec.Meta(description="credits to add, e.g. 10 or -2.5")]
    reason: Annotated[str, msgspec.Meta(max_length=500)] | None = None


Limit = Annotated[int, Parameter(ge=0, le=1000, description="newest ledger rows (default 50)")]


async def _credits(conn: AsyncConnection[Any], uid: UUID, limit: int) -> Credits:
    report = await credit_report(conn, uid, limit=limit)
    if report is None:
        return Credits(budget=False)
    return msgspec.convert({"budget": True, **report}, Credits, strict=False)


class CreditsController(Controller):
    path = "/api"
    tags = ("credits",)

    @get("/me/credits", summary="The caller's credit balance, frozen credits and ledger")
    async def mine(self, conn: Conn, user: NamedDependency[User], limit: Limit = 50) -> Credits:
        return await _credits(conn, user.uid, limit)

    @get("/users/{uid:uuid}/credits", summary="A user's credit balance and ledger (admins)")
    async def of_user(
        self, conn: Conn, user: NamedDependency[User], uid: FromPath[UUID], limit: Limit = 50
    ) -> Credits:
        require_admin(user, "see other users' credits")
        return await _credits(conn, uid, limit)

    @post(
        "/users/{uid:uuid}/credits",
        status_code=200,
        summary="Top up or lower a user's credit balance (admins); opens their budget",
    )
    async def change(
        self,
        conn: Conn,
        user: NamedDependency[User],
        uid: FromPath[UUID],
        data: JSONBody[CreditChange],
    ) -> Credits:
        require_admin(user, "change credits")
        await credit_add(conn, uid, data.amount, actor=user.uid, reason=data.reason)
        return await _credits(conn, uid, 50)
