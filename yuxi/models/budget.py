"""A run's budget in the worker (sql/schema/24_credits.sql).

The claim froze one model call's estimate (``credit_hold``), or found the balance short
(``credit_error``: the run fails with ``insufficient_credits`` before any model call).
Before each further model call the hold is extended to what the run has spent plus one
more call (``yuxi.credit_refreeze``); when the balance cannot cover that, the call is
refused with InsufficientCredits and the run fails. The run's end settles the hold in
SQL, whoever ends it."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg_pool import AsyncConnectionPool

from yuxi.models.usage import RunUsage
from yuxi.queue.credits import credit_refreeze


class RunBudget:
    """The model-call gate (``current_call_gate``) of a run that holds credits."""

    def __init__(
        self, pool: AsyncConnectionPool[Any], run_id: UUID, token: UUID, usage: RunUsage
    ) -> None:
        self.pool = pool
        self.run_id = run_id
        self.token = token
        self.usage = usage
        self.calls = 0

    async def before_model_call(self) -> None:
        self.calls += 1
        if self.calls == 1:
            return  # the claim's freeze covers the first call
        async with self.pool.connection() as conn:
            await credit_refreeze(conn, self.run_id, self.token, self.usage.finished())
