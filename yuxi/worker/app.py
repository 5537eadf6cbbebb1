"""The procrastinate App of a worker process and its tasks, and the process around them.

- ``execute_run(run_id)`` (queue ``yuxi_runs``): delivered by the SQL that makes a run
  pending; executes it. A duplicate delivery finds the run claimed and does nothing.
- ``ingest_document(document_id)`` (queue ``yuxi_knowledge``): deferred by the SQL that
  records an uploaded document; extracts, chunks and embeds it (yuxi.knowledge).
- ``discover_mcp_tools(server_id)`` (queue ``yuxi_mcp``): deferred by
  ``yuxi.mcp_tools_request``; lists an MCP server's tools (yuxi.mcp.discovery).
- ``yuxi_reconcile_leases``, ``yuxi_redeliver_runs`` and ``yuxi_tick_schedules`` (queue
  ``yuxi_maintenance``, periodic): fail or retry runs whose lease expired; re-deliver
  pending runs whose job vanished or whose worker stopped, and documents whose ingestion
  did, and delete the jobs that did their work; fire due scheduled jobs. procrastinate
  defers each periodic slot once across all workers.

The process outlives its database connections. procrastinate's worker ends when it
loses the database (a failed fetch, heartbeat or listener); ``run_worker`` then waits
for the database with a jittered back-off and starts a new one, with a new App and
pool. The runs under way are not procrastinate's (``inflight.InFlightRuns``): they keep
their leases through the outage and finish, or are given back, when it is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from procrastinate import App, PsycopgConnector
from procrastinate.worker import Worker
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from yuxi.db.outages import Backoff, describe, is_connection_error
from yuxi.db.pools import app_pool, checkpointer_pool, procrastinate_pool, store_pool
from yuxi.files.store import PostgresFileStore
from yuxi.knowledge.ingest import MAX_ATTEMPTS, ingest_document
from yuxi.knowledge.search import DatabaseKnowledge
from yuxi.mcp.discovery import discover_server_tools
from yuxi.queue.files import file_gc
from yuxi.queue.knowledge import kb_document_redeliver_stalled
from yuxi.queue.lg import lg_temporary_sweep
from yuxi.queue.maintenance import (
    delivery_prune,
    run_reconcile_expired,
    run_redeliver_orphans,
    run_redeliver_stalled,
)
from yuxi.resources import DatabaseCatalog, ResourceCatalog
from yuxi.runtime.cancel import CancelWatcher
from yuxi.scheduling.ticker import tick_until_idle
from yuxi.settings import Settings
from yuxi.worker.inflight import InFlightRuns
from yuxi.worker.metrics import count_reconnect
from yuxi.worker.stack import RunStack

if TYPE_CHECKING:
    from yuxi.runtime.executor import RunExecutor

log = logging.getLogger("yuxi.worker")

RUNS_QUEUE = "yuxi_runs"
MAINTENANCE_QUEUE = "yuxi_maintenance"
KNOWLEDGE_QUEUE = "yuxi_knowledge"
MCP_QUEUE = "yuxi_mcp"
# procrastinate's worker is named so in its logs ("procrastinate.worker.yuxi")
PROCRASTINATE_NAME = "yuxi"
# A procrastinate worker sends a heartbeat this often; one silent for STALLED_SECONDS
# (three heartbeats missed: procrastinate's own stalled_worker_timeout) is gone, and the
# delivery it held is re-delivered.
HEARTBEAT_SECONDS = 10.0
STALLED_SECONDS = 30.0
# a procrastinate worker that lived this long had a working database: back-off restarts
HEALTHY_SECONDS = 30.0


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Recovery:
    """How a worker finds deliveries that nothing will finish. ``scans=False`` leaves
    out the stalled-delivery scan and the job pruning (a benchmark's baseline)."""

    heartbeat_seconds: float = HEARTBEAT_SECONDS
    stalled_seconds: float = STALLED_SECONDS
    scans: bool = True


@dataclass
class WorkerRuntime:
    """What the tasks of one worker process share, across procrastinate's restarts."""

    pool: AsyncConnectionPool[Any]
    # the executor, once what executes runs is loaded (in the background from the start)
    stack: RunStack
    runs: InFlightRuns
    # every pool the runs use (the queue's and the checkpointer's)
    pools: tuple[AsyncConnectionPool[Any], ...] = ()
    home: Path = Path(".yuxi")


@asynccontextmanager
async def open_runtime(
    url: str,
    settings: Settings,
    name: str | None = None,
    catalog: ResourceCatalog | None = None,
) -> AsyncIterator[WorkerRuntime]:
    """Pools, checkpointer and cancel listener for one worker process; the run executor
    is built once its stack is loaded (``RunStack``). ``catalog`` replaces the
    database's resource catalog (for embedding yuxi with other resources). Nothing here
    needs the database to be up: pools connect in the background and the listener
    keeps trying."""
    pool = app_pool(url, max_size=max(settings.worker_concurrency + 2, settings.pool_max_size))
    saver_pool = checkpointer_pool(url, max_size=max(settings.worker_concurrency, 2))
    # LangGraph's store, for the graphs that use one (get_store()): few and short calls
    items_pool = store_pool(url, max_size=max(settings.worker_concurrency // 4, 2))
    watcher = CancelWatcher(url)
    await pool.open()
    await saver_pool.open()
    await items_pool.open()
    try:
        await watcher.start()

        def executor() -> RunExecutor:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

            from yuxi.runtime.executor import ExecutorSettings, RunExecutor
            from yuxi.runtime.store import postgres_store

            return RunExecutor(
                pool,
                AsyncPostgresSaver(saver_pool),
                catalog or DatabaseCatalog(pool),
                watcher,
                ExecutorSettings(
                    worker_name=name or worker_name(),
                    home=settings.home.resolve(),
                    lease_seconds=settings.lease_seconds,
                    renew_seconds=settings.lease_renew_seconds,
                    infra_retries=settings.infra_retries,
                ),
                knowledge=DatabaseKnowledge(pool),
                store=postgres_store(items_pool),
            )

        stack = RunStack(executor)
        runs = InFlightRuns(stack.executor, settings.worker_concurrency)
        graphs = None if settings.graphs is None else _load_graphs(stack, settings.graphs)
        try:
            yield WorkerRuntime(
                pool, stack, runs, (pool, saver_pool, items_pool), settings.home.resolve()
            )
        finally:
            if graphs is not None:
                graphs.cancel()
                await asyncio.gather(graphs, return_exceptions=True)
    finally:
        await watcher.stop()
        await items_pool.close()
        await saver_pool.close()
        await pool.close()


def _load_graphs(stack: RunStack, path: Path) -> asyncio.Task[None]:
    """The project's graphs as backends of this worker (now: a bad langgraph.json ends
    the start), imported once the stack is loaded (an import error is logged; that
    graph's runs fail with it)."""
    from yuxi.agents.graphs import register_project

    register_project(path)

    async def load() -> None:
        from yuxi.runtime.graphs import preload_graphs

        await stack.loaded()
        await preload_graphs(path)

    return asyncio.create_task(load())


def build_app(url: str, runtime: WorkerRuntime, settings: Settings, recovery: Recovery) -> App:
    """The procrastinate App bound to ``runtime``."""
    app = App(connector=PsycopgConnector(conninfo=url))
    every = f"* * * * * */{settings.maintenance_seconds}"

    @app.task(name="execute_run", queue=RUNS_QUEUE)
    async def execute_run(run_id: str) -> None:
        await runtime.runs.deliver(UUID(run_id))

    @app.task(name="ingest_document", queue=KNOWLEDGE_QUEUE)
    async def ingest(document_id: str) -> None:
        await runtime.stack.loaded()  # the text splitter, not imported here meanwhile
        # the original is read from the store: any worker, whatever its YUXI_HOME
        document = await ingest_document(
            runtime.pool, PostgresFileStore(runtime.pool), UUID(document_id)
        )
        if document is not None:
            log.info(
                "document %s (%s): %s, %d chunks",
                document.id,
                document.filename,
                document.status,
                document.chunks,
            )

    @app.task(name="discover_mcp_tools", queue=MCP_QUEUE)
    async def discover_mcp_tools(server_id: str) -> None:
        # the MCP client imports LangChain: not on this thread while the stack loads it
        await runtime.stack.loaded()
        await discover_server_tools(runtime.pool, runtime.home, UUID(server_id))

    @app.periodic(cron=every)
    @app.task(name="yuxi_reconcile_leases", queue=MAINTENANCE_QUEUE)
    async def reconcile_leases(timestamp: int) -> None:
        async with runtime.pool.connection() as conn:
            for run in await run_reconcile_expired(conn, infra_limit=settings.infra_retries):
                log.warning("run %s: lease expired; now %s", run.run_id, run.status)

    @app.periodic(cron=every)
    @app.task(name="yuxi_redeliver_runs", queue=MAINTENANCE_QUEUE)
    async def redeliver_runs(timestamp: int) -> None:
        async with runtime.pool.connection() as conn:
            for run in await run_redeliver_orphans(conn):
                log.warning(
                    "run %s: delivery was missing; re-delivered as job %s", run.run_id, run.job_id
                )
            if not recovery.scans:
                return
            stalled = await run_redeliver_stalled(conn, stalled_seconds=recovery.stalled_seconds)
            for run in stalled:
                log.warning(
                    "run %s: its delivery's worker stopped; re-delivered as job %s",
                    run.run_id,
                    run.job_id,
                )
            for document in await kb_document_redeliver_stalled(
                conn, stalled_seconds=recovery.stalled_seconds, max_attempts=MAX_ATTEMPTS
            ):
                log.warning(
                    "document %s: its ingestion stopped; now %s",
                    document.document_id,
                    document.status,
                )
            await delivery_prune(conn, stalled_seconds=recovery.stalled_seconds)
            await lg_temporary_sweep(conn)  # stateless runs' threads whose runs ended

    @app.periodic(cron=every)
    @app.task(name="yuxi_collect_files", queue=MAINTENANCE_QUEUE)
    async def collect_files(timestamp: int) -> None:
        async with runtime.pool.connection() as conn:
            removed = await file_gc(conn)
        if removed.contents:
            log.info(
                "files: %d contents no file names removed (%d bytes)",
                removed.contents,
                removed.bytes,
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
    recovery: Recovery | None = None,
) -> None:
    """Runs a worker until it is stopped (SIGINT/SIGTERM with ``install_signal_handlers``,
    or cancelling this coroutine): it stops taking runs, lets running ones finish within
    the grace period, then releases them for another attempt. Losing the database never
    ends it: it reconnects and carries on."""
    recovery = recovery or Recovery()
    _quiet_procrastinate_outages()
    async with open_runtime(url, settings, catalog=catalog) as runtime:
        stop = asyncio.Event()
        with _stop_on_signals(stop, install_signal_handlers):
            deliveries = asyncio.create_task(_deliver(url, runtime, settings, recovery))
            stopped = asyncio.create_task(stop.wait())
            # a stack that cannot be imported (a broken install) ends the worker, as an
            # import at start would have, rather than failing every run
            broken = asyncio.create_task(runtime.stack.failed())
            tasks: tuple[asyncio.Task[Any], ...] = (deliveries, stopped, broken)
            try:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in (deliveries, broken):
                    if task.done():
                        task.result()
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await runtime.runs.drain(settings.shutdown_grace_seconds)


async def _deliver(
    url: str, runtime: WorkerRuntime, settings: Settings, recovery: Recovery
) -> None:
    """procrastinate's worker, started again each time it ends, once the database
    answers."""
    backoff = Backoff(first=0.25, cap=2.0)
    # procrastinate_workers rows of this process's past workers that could not
    # unregister (the database was gone): the next worker deletes them, so their jobs
    # count as abandoned at once and health counts this process once
    left_behind: list[int] = []
    while True:
        started = time.monotonic()
        try:
            await _procrastinate_worker(url, runtime, settings, recovery, left_behind)
            # it stops itself when its heartbeat, listener or fetch fails (its log says so)
            reason = "it stopped"
        except Exception as error:
            if not is_connection_error(error):
                log.exception("worker: procrastinate's worker failed")
            reason = describe(error)
        log.warning("worker: restarting procrastinate's worker (%s)", reason)
        if time.monotonic() - started > HEALTHY_SECONDS:
            backoff.reset()
        await asyncio.sleep(backoff.next())
        await _wait_for_database(url, runtime.pools, backoff)


async def _procrastinate_worker(
    url: str,
    runtime: WorkerRuntime,
    settings: Settings,
    recovery: Recovery,
    left_behind: list[int],
) -> None:
    """One procrastinate worker, with its own App and pool, until it ends. Its jobs are
    cancelled as it ends, never its runs (``InFlightRuns``), hence no graceful wait."""
    jobs_pool = procrastinate_pool(url, max_size=4)
    app = build_app(url, runtime, settings, recovery)
    app.perform_import_paths()  # type: ignore[no-untyped-call]
    worker = Worker(
        app=app,
        queues=[RUNS_QUEUE, MAINTENANCE_QUEUE, KNOWLEDGE_QUEUE, MCP_QUEUE],
        name=PROCRASTINATE_NAME,
        concurrency=settings.worker_concurrency,
        shutdown_graceful_timeout=0,
        delete_jobs="successful",
        install_signal_handlers=False,
        update_heartbeat_interval=recovery.heartbeat_seconds,
        stalled_worker_timeout=recovery.stalled_seconds,
        worker_middleware=[_note_unrecorded_ends],
    )
    async with jobs_pool, app.open_async(pool=jobs_pool):
        while left_behind:
            await app.job_manager.unregister_worker(left_behind[-1])
            left_behind.pop()
        try:
            await worker.run()  # type: ignore[no-untyped-call]
        finally:
            if worker.worker_id is not None:  # set until it unregistered
                left_behind.append(worker.worker_id)


async def _note_unrecorded_ends(call_next: Callable[[], Awaitable[Any]], *_: Any) -> Any:
    """A worker middleware: procrastinate records a job's end in the job's own task after
    the job returns, and a failure there (the connection lost at that moment) is left in
    the task for nobody to see. Here it becomes one line of the log; the job's row,
    left `doing`, is deleted by yuxi.delivery_prune."""
    task = asyncio.current_task()
    if task is not None:
        task.add_done_callback(_unrecorded_end)
    return await call_next()


def _unrecorded_end(task: asyncio.Task[Any]) -> None:
    if task.cancelled() or task.exception() is None:
        return
    error = task.exception()
    assert error is not None
    if is_connection_error(error):
        log.warning(
            "worker: procrastinate could not record the end of %s (%s)",
            task.get_name(),
            describe(error),
        )
    else:
        log.error(
            "worker: procrastinate failed to record the end of %s", task.get_name(), exc_info=error
        )


async def _wait_for_database(
    url: str, pools: tuple[AsyncConnectionPool[Any], ...], backoff: Backoff
) -> None:
    """Returns once a new connection answers, trying again with ``backoff`` meanwhile.
    Each try also has the runs' pools check their idle connections and try to connect
    again (``pool.check``), so that runs waiting for a connection get one as soon as the
    database is back."""
    down_since = time.monotonic()
    failed = 0
    while True:
        for pool in pools:
            with contextlib.suppress(Exception):
                await pool.check()
        try:
            conn = await AsyncConnection.connect(url, autocommit=True, connect_timeout=5)
            async with conn:
                await conn.execute("SELECT 1")
        except Exception as error:
            if not is_connection_error(error):
                raise
            if failed == 0:
                log.warning("worker: the database is unreachable (%s); retrying", describe(error))
            failed += 1
            await asyncio.sleep(backoff.next())
            continue
        if failed:
            log.warning(
                "worker: the database answers again after %.1fs", time.monotonic() - down_since
            )
        count_reconnect()
        return


@contextlib.contextmanager
def _stop_on_signals(stop: asyncio.Event, install: bool) -> Iterator[None]:
    if not install:
        yield
        return
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for signum in signals:
        loop.add_signal_handler(signum, stop.set)
    try:
        yield
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)


class _OutageTracebacks(logging.Filter):
    """procrastinate logs a lost connection as an error with a traceback (a side task
    failed, a job failed); yuxi's worker says what happens next in one line, so these
    become one-line warnings."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] and is_connection_error(record.exc_info[1]):
            message = " ".join(record.getMessage().split())
            record.msg = f"{message} ({describe(record.exc_info[1])})"
            record.args = None
            record.exc_info = None
            record.exc_text = None
            record.levelno = logging.WARNING
            record.levelname = logging.getLevelName(logging.WARNING)
        return True


_OUTAGE_FILTER = _OutageTracebacks()


def _quiet_procrastinate_outages() -> None:
    names = (
        "procrastinate.worker",
        f"procrastinate.worker.{PROCRASTINATE_NAME}",
        "procrastinate.utils",
    )
    for name in names:
        logger = logging.getLogger(name)
        if _OUTAGE_FILTER not in logger.filters:
            logger.addFilter(_OUTAGE_FILTER)
