"""Transitional: old names kept while the runtime moves to the noun modules. Deleted
once nothing imports it."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from yuxi.queue.runs import RunOutcome
from yuxi.queue.runs import run_result as _run_result


async def run_result(conn: AsyncConnection[Any], run_id: UUID, uid: UUID) -> RunOutcome:
    return await _run_result(conn, run_id, uid=uid)
