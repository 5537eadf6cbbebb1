"""One run's ledger of the side-effecting tool calls it applied (``yuxi.run_tool_calls``),
lent to its tools as ``services().calls``: a later attempt of the run that makes the
same call again (same tool call id) gets the recorded result instead of applying it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from psycopg_pool import AsyncConnectionPool

from yuxi.queue.runs import run_tool_call_record, run_tool_call_result


@dataclass(frozen=True)
class RunToolCalls:
    pool: AsyncConnectionPool[Any]
    run_id: UUID
    lease_token: UUID

    async def applied(self, call_id: str) -> str | None:
        async with self.pool.connection() as conn:
            return await run_tool_call_result(conn, self.run_id, call_id)

    async def record(self, call_id: str, tool: str, result: str) -> None:
        async with self.pool.connection() as conn:
            await run_tool_call_record(conn, self.run_id, self.lease_token, call_id, tool, result)
