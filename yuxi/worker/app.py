"""The procrastinate App of a worker process and its tasks.

- ``execute_run(run_id)`` (queue ``yuxi_runs``): delivered by the SQL that makes a run
  pending; executes it. A duplicate delivery finds the run claimed and does nothing.
- ``yuxi_reconcile_leases``, ``yuxi_redeliver_runs`` and ``yuxi_tick_schedules`` (queue
  ``yuxi_maintenance``, periodic): fail or retry runs whose lease expired; re-deliver
  pending runs whose job vanished; fire due scheduled jobs. procrastinate defers each
  periodic slot once across all workers.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from procrastinate import App, PsycopgConnector
from psycopg_pool import AsyncConnectionPool

from yuxi.db.pools import app_pool, checkpointer_pool, procrastinate_pool
from yuxi.queue.maintenance import run_reconcile_expired, run_redeliver_orphans
from yuxi.runtime.cancel import CancelWatcher
from yuxi.runtime.executor import ExecutorSettings, RunExecutor
from yuxi.runtime.resources import DatabaseCatalog, ResourceCatalog
from yuxi.scheduling.ticker import tick_until_idle
from yuxi.settings import Settings
from yuxi.worker.metrics import timed_run

log = logging.getLogger("yuxi.worker")

RUNS_QUEUE = "yuxi_runs"
MAINTENANCE_QUEUE = "yuxi_maintenance"


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class WorkerRuntime:
    """What the tasks of one worker process share."""

    pool: AsyncConnectionPool[Any]
    executor: RunExecutor


@asynccontextmanager
async def open_runtime(
    url: str,
    settings: Settings,
    name: str | None = None,
    catalog: ResourceCatalog | None = None,
) -> AsyncIterator[WorkerRuntime]:
    """Pools, checkpointer and cancel listener for one worker process. ``catalog``
    replaces the database's resource catalog (for embedding yuxi with other resources)."""
    pool = app_pool(url, max_size=max(settings.worker_concurrency + 2, settings.pool_max_size))
    saver_pool = checkpointer_pool(url, max_size=max(settings.worker_concurrency, 2))
    watcher = CancelWatcher(url)
    await pool.open()
    await saver_pool.open()
    try:
        await watcher.start()
        executor = RunExecutor(
            pool,
            AsyncPostgresSaver(saver_pool),
            catalog or DatabaseCatalog(pool),
            watcher,
            ExecutorSettings(
                worker_name=name or worker_name(),
                home=settings.home.resolve(),
                lease_seconds=settings.lease_seconds,
                renew_seconds=settings.lease_renew_seconds,
            ),
        )
        yield WorkerRuntime(pool, executor)
    finally:
        await watcher.stop()
        await saver_pool.close()
        await pool.close()


def build_app(url: str, runtime: WorkerRuntime, settings: Settings) -> App:
    """The procrastinate App bound to ``runtime``."""
    app = App(connector=PsycopgConnector(conninfo=url))
    every = f"* * * * * */{settings.maintenance_seconds}"

    @app.task(name="execute_run", queue=RUNS_QUEUE)
    async def execute_run(run_id: str) -> None:
        status = await timed_run(runtime.executor.execute(UUID(run_id)))
        log.info("run %s: %s", run_id, status or "not claimed")

    @app.periodic(cron=every)
    @app.task(name="yuxi_reconcile_leases", queue=MAINTENANCE_QUEUE)
    async def reconcile_leases(timestamp: int) -> None:
        async with runtime.pool.connection() as conn:
            for run in await run_reconcile_expired(conn):
                log.warning("run %s: lease expired; now %s", run.run_id, run.status)

    @app.periodic(cron=every)
    @app.task(name="yuxi_redeliver_runs", queue=MAINTENANCE_QUEUE)
    async def redeliver_runs(timestamp: int) -> None:
        async with runtime.pool.connection() as conn:
            for run in await run_redeliver_orphans(conn):
                log.warning(
                    "run %s: delivery was missing; re-delivered as job %s", run.run_id, run.job_id
                )

    @app.periodic(cron=every)
    @app.task(name="yuxi_tick_schedules", queue=MAINTENANCE_QUEUE)
    async def tick_schedules(timestamp: int) -> None:
        async with runtime.pool.connection() as conn:
            result = await tick_until_idle(conn)
        if result.handled:
            log.info(
                "scheduled jobs: %d fired, %d skipped, %d failed, %d to retry",
                result.fired,
                result.skipped,
                result.failed,
                result.retry,
            )

    return app


async def run_worker(
    url: str,
    settings: Settings,
    *,
    install_signal_handlers: bool = True,
    catalog: ResourceCatalog | None = None,
) -> None:
    """Runs a worker until it is stopped (SIGINT/SIGTERM: stop taking runs, let running
    ones finish within the grace period, then release them for another attempt)."""
    jobs_pool = procrastinate_pool(url, max_size=4)
    async with open_runtime(url, settings, catalog=catalog) as runtime, jobs_pool:
        app = build_app(url, runtime, settings)
        async with app.open_async(pool=jobs_pool):
            await app.run_worker_async(
                queues=[RUNS_QUEUE, MAINTENANCE_QUEUE],
                concurrency=settings.worker_concurrency,
                shutdown_graceful_timeout=settings.shutdown_grace_seconds,
                delete_jobs="successful",
                install_signal_handlers=install_signal_handlers,
            )
