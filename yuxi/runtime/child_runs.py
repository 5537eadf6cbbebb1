"""The worker's side of the ``task`` tool: each call is a child run, executed in place.

``yuxi.run_create_subagent`` creates the child (run_type ``subagent``, created by the
calling run under its lease). It has no delivery job: the calling worker claims and
executes it itself, inside the parent's tool call, so a parent never waits for a free
worker slot, and no other worker can take it. A child given back for another attempt
(``yuxi.run_retry`` after a lost connection) is claimed again in place. Cancelling the
parent cascades to the child (``run_request_cancel``); a parent stopped mid-call
releases its child like any run its worker gives up, and a parent given back for
another attempt cancels its children (``yuxi.run_cancel_children``).
"""

from __future__ import annotations

from typing import Any, Protocol
from uuid import UUID

from psycopg_pool import AsyncConnectionPool

from yuxi.queue.errors import QueueError
from yuxi.queue.runs import RunLease, run_create_subagent, run_result
from yuxi.queue.statuses import RunStatus


class Executor(Protocol):
    """What child runs need from the worker's run executor."""

    @property
    def pool(self) -> AsyncConnectionPool[Any]:
        """The executor's connection pool (autocommit)."""
        ...

    async def execute(self, run_id: UUID) -> str | None:
        """Claims and executes ``run_id``; its final status, or None if another
        delivery holds it."""
        ...


class ChildRuns:
    """The ``Delegate`` of one parent run: starts and executes its child runs."""

    def __init__(self, executor: Executor, parent: RunLease, uid: UUID) -> None:
        self._executor = executor
        self._parent = parent
        self._uid = uid

    async def run_subagent(self, slug: str, task: str) -> str:
        """Runs subagent ``slug`` on ``task`` as a child run of the parent; its answer,
        or one line saying how it ended instead."""
        pool = self._executor.pool
        try:
            async with pool.connection() as conn:
                child = await run_create_subagent(
                    conn,
                    self._parent.run_id,
                    self._parent.token,
                    agent_slug=slug,
                    run_input={"task": task},
                )
        except QueueError as error:
            return f"subagent {slug} could not start: {error}"
        status = await self._executor.execute(child)
        # given back for another attempt (its worker lost the database): take it again
        while status == RunStatus.PENDING:
            status = await self._executor.execute(child)
        async with pool.connection() as conn:
            # not claimed (None): it ended before its claim (cancelled with its parent)
            result = await run_result(conn, child, uid=self._uid)
        if result.status == RunStatus.COMPLETED:
            return result.output or ""
        reason = f": {result.error_message}" if result.error_message else ""
        return f"subagent {slug} {result.status}{reason}"
