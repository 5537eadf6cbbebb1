"""Prometheus metrics of a worker process: runs in flight, how long each took and how it
ended, reconnects to the database. ``yuxi worker --metrics-port N`` serves them over
HTTP (``serve_worker_metrics``); under ``yuxi up`` the API's GET /metrics shows them,
since the worker runs in the API's process.

Finished runs are counted here, where they finish, rather than in the database's
snapshot: counting them in SQL would read every run ever made.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from wsgiref.simple_server import WSGIServer

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics, start_http_server

# a *_created sample per counter and histogram child would double the series for nothing
disable_created_metrics()  # type: ignore[no-untyped-call]

RUNS_IN_FLIGHT = Gauge(
    "yuxi_worker_runs_in_flight", "Deliveries of runs this worker process is executing now"
)
RUN_DURATION = Histogram(
    "yuxi_worker_run_duration_seconds",
    "Seconds a delivery of a run took in this worker, by how it ended: the run's status"
    " (completed, failed, cancelled, interrupted, ...), not_claimed (another delivery had"
    " it), released (the worker stopped and released it) or error (the executor raised)",
    ["status"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
)
RECONNECTS = Counter(
    "yuxi_worker_reconnects",
    "Times this worker process re-established a lost database connection, by connection",
    ["connection"],
)
RECONNECTS.labels("database")  # shown as 0 before the first reconnect

NOT_CLAIMED = "not_claimed"
RELEASED = "released"
ERROR = "error"


async def timed_run(execution: Awaitable[str | None]) -> str | None:
    """Awaits one run's execution (``RunExecutor.execute``), counted in flight while it
    lasts and observed in ``yuxi_worker_run_duration_seconds`` under its outcome."""
    RUNS_IN_FLIGHT.inc()
    started = time.perf_counter()
    outcome = ERROR
    try:
        status = await execution
        outcome = status or NOT_CLAIMED
        return status
    except asyncio.CancelledError:
        outcome = RELEASED  # cancelling an execution releases the run (worker shutdown)
        raise
    finally:
        RUNS_IN_FLIGHT.dec()
        RUN_DURATION.labels(outcome).observe(time.perf_counter() - started)


def count_reconnect(connection: str = "database") -> None:
    """Counts one re-established database connection of this worker; ``connection``
    names which one (``database``, ``cancel_listener``, ...: a small fixed set, since
    each value is a series)."""
    RECONNECTS.labels(connection).inc()


def serve_worker_metrics(port: int, host: str) -> WSGIServer:
    """Serves this process's metrics at ``http://host:port/metrics`` from a daemon
    thread; ``shutdown()`` on the result stops it. Raises OSError if it cannot listen."""
    server, _ = start_http_server(port, addr=host)
    return server
