"""The runs one worker process executes, owned by the process rather than by the
procrastinate job that delivered each.

A delivery job waits for one of the process's run slots, starts the run as a task of
its own and waits for it. When procrastinate's worker is torn down (it lost its
database connection and is being rebuilt) its jobs are cancelled, but the runs they
started go on: they hold their leases, finish when the database answers, and keep their
slots, so a rebuilt worker never executes more runs at once than the concurrency
allows. Only the process stopping ends them (``drain``): a grace period, then each run
left is released for another attempt.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from uuid import UUID

from yuxi.worker.metrics import timed_run

if TYPE_CHECKING:
    from yuxi.runtime.executor import RunExecutor

log = logging.getLogger("yuxi.worker")


class InFlightRuns:
    """``executor``: the worker's executor once it can be had (``RunStack.executor``)."""

    def __init__(self, executor: Callable[[], Awaitable[RunExecutor]], slots: int) -> None:
        self._executor = executor
        self._slots = asyncio.Semaphore(slots)
        self._tasks: set[asyncio.Task[str | None]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    async def deliver(self, run_id: UUID) -> str | None:
        """Executes the delivered run in a free slot; its final status (None when
        another delivery had it). Cancelling the caller leaves the run going."""
        await self._slots.acquire()
        try:
            task = asyncio.create_task(self._execute(run_id), name=f"run {run_id}")
        except BaseException:
            self._slots.release()
            raise
        self._tasks.add(task)
        task.add_done_callback(self._forget)
        return await asyncio.shield(task)

    async def drain(self, grace_seconds: float) -> None:
        """Lets the runs go on for ``grace_seconds``, then cancels the rest (each is
        released for another attempt) and waits for them."""
        if self._tasks:
            log.info("waiting up to %.0fs for %d runs to finish", grace_seconds, len(self._tasks))
            await asyncio.wait(set(self._tasks), timeout=grace_seconds)
        left = set(self._tasks)
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)

    async def _execute(self, run_id: UUID) -> str | None:
        try:
            executor = await self._executor()
            status = await timed_run(executor.execute(run_id))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("run %s: the worker failed while executing it", run_id)
            raise
        finally:
            self._slots.release()
        log.info("run %s: %s", run_id, status or "not claimed")
        return status

    def _forget(self, task: asyncio.Task[str | None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # logged by _execute; a detached run has no job to re-raise it
