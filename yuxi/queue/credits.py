"""Budgets (sql/schema/24_credits.sql): a user's credit balance, its ledger, and the
freeze a run holds while it calls platform models."""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from yuxi.queue.calls import call_scalar, encode_json


async def credit_add(
    conn: AsyncConnection[Any],
    uid: UUID,
    amount: Decimal,
    *,
    actor: UUID | None = None,
    reason: str | None = None,
) -> Decimal:
    """Adds ``amount`` (negative: removes) to the user's balance as a ledger row and
    returns the new balance; InsufficientCredits when it would go below 0."""
    balance = await call_scalar(
        conn,
        "SELECT yuxi.credit_add(%(uid)s, %(amount)s, %(actor)s, %(reason)s)",
        {"uid": uid, "amount": amount, "actor": actor, "reason": reason},
    )
    return Decimal(balance)


async def credit_report(
    conn: AsyncConnection[Any], uid: UUID, *, limit: int = 50
) -> dict[str, Any] | None:
    """``{balance, frozen, updated_at, ledger}`` (newest ``limit`` rows; amounts as
    decimal text, exact), or None for a user without a budget."""
    report: dict[str, Any] | None = await call_scalar(
        conn, "SELECT yuxi.credit_report(%(uid)s, %(limit)s)", {"uid": uid, "limit": limit}
    )
    return report


async def credit_refreeze(
    conn: AsyncConnection[Any], run_id: UUID, token: UUID, usage: list[dict[str, Any]]
) -> Decimal | None:
    """Before another model call: extends the run's hold to its cost so far plus one
    call; InsufficientCredits when the balance cannot cover it."""
    hold = await call_scalar(
        conn,
        "SELECT yuxi.credit_refreeze(%(run_id)s, %(token)s, %(usage)s::jsonb)",
        {"run_id": run_id, "token": token, "usage": encode_json(usage)},
    )
    return None if hold is None else Decimal(hold)
