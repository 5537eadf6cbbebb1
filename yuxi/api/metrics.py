"""Prometheus metrics of the API process: HTTP requests counted by route template, and
the text of GET /metrics (this process's metrics plus the database's, read at scrape
time through ``yuxi.metrics_snapshot``).

HTTP metrics are this process's own: run several API processes and each counts the
requests it served. The database-derived ones are the same from every process.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from prometheus_client import (
    REGISTRY,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from psycopg_pool import AsyncConnectionPool

from yuxi.api.request_outcome import answered_by_application, sent_status
from yuxi.queue.metrics import MetricSample, metrics_snapshot

log = logging.getLogger("yuxi.api.metrics")

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

# a scrape must answer within Prometheus's scrape timeout (10 s by default) even while
# the database is down: then yuxi_database_up says 0 and the process metrics still come
SNAPSHOT_TIMEOUT_SECONDS = 3.0

# a *_created sample per counter and histogram child would double the series for nothing
disable_created_metrics()  # type: ignore[no-untyped-call]

HTTP_REQUESTS = Counter(
    "yuxi_http_requests",
    "HTTP requests answered, by method, route template and status",
    ["method", "route", "status"],
)
HTTP_LATENCY = Histogram(
    "yuxi_http_request_duration_seconds",
    "Seconds from a request's arrival until its response started (for an SSE stream: until"
    " the stream opened), by method and route template",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)

# a request the router matched no route for: its raw path could hold anything
UNMATCHED = "unmatched"
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class HttpMetrics:
    """ASGI middleware counting each HTTP request under its route template
    (``/api/agent/runs/{run_id}``, set by Litestar's router), never its raw path, so no
    id becomes a label. The metric children are cached per label set: the request path
    pays a dict lookup, an increment and an observation."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._counters: dict[tuple[str, str, str], Any] = {}
        self._latencies: dict[tuple[str, str], Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        response: list[Any] = [None, None]  # status, seconds until it started

        async def send_and_time(message: Message) -> None:
            if message["type"] == "http.response.start":
                response[0] = message["status"]
                response[1] = time.perf_counter() - started
            await send(message)

        try:
            await self._app(scope, receive, send_and_time)
        finally:
            self._count(scope, response[0], response[1])

    def _count(self, scope: Scope, answered: int | None, seconds: float | None) -> None:
        # what the client was sent (yuxi/api/request_outcome.py): 499 when it left first,
        # the HTTP layer's own status when that refused the request; then the
        # application's response went nowhere, and neither did its latency
        status = sent_status(scope, answered)
        if not answered_by_application(scope):
            seconds = None
        method = scope["method"] if scope["method"] in _METHODS else "other"  # type: ignore[typeddict-item]
        route = scope.get("path_template") or UNMATCHED
        key = (method, route, str(status))
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters[key] = HTTP_REQUESTS.labels(*key)
        counter.inc()
        if seconds is not None:
            latency = self._latencies.get(key[:2])
            if latency is None:
                latency = self._latencies[key[:2]] = HTTP_LATENCY.labels(method, route)
            latency.observe(seconds)


class _Snapshot(Collector):
    """The rows of one ``yuxi.metrics_snapshot()`` call as metric families."""

    def __init__(self, samples: Iterable[MetricSample], up: bool, seconds: float) -> None:
        self._samples = samples
        self._up = up
        self._seconds = seconds

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "yuxi_database_up",
            "1 when this process read the database's metrics at this scrape, 0 when it could not",
            value=1.0 if self._up else 0.0,
        )
        yield GaugeMetricFamily(
            "yuxi_metrics_snapshot_duration_seconds",
            "Seconds this scrape spent reading yuxi.metrics_snapshot()",
            value=self._seconds,
        )
        families: dict[str, tuple[CounterMetricFamily | GaugeMetricFamily, list[str]]] = {}
        for sample in self._samples:
            found = families.get(sample.metric)
            if found is None:
                names = sorted(sample.labels)
                family: CounterMetricFamily | GaugeMetricFamily
                if sample.type == "counter":
                    name = sample.metric.removesuffix("_total")
                    family = CounterMetricFamily(name, sample.help, labels=names)
                else:
                    family = GaugeMetricFamily(sample.metric, sample.help, labels=names)
                found = families[sample.metric] = (family, names)
            family, names = found
            family.add_metric([str(sample.labels.get(name, "")) for name in names], sample.value)
        for family, _ in families.values():
            yield family


async def metrics_text(pool: AsyncConnectionPool[Any]) -> bytes:
    """The text of GET /metrics: this process's registry (HTTP requests, a worker's
    metrics when it runs in this process, process and Python metrics), then the
    database's snapshot. A database that does not answer leaves the rest intact."""
    started = time.perf_counter()
    samples: list[MetricSample] = []
    up = True
    try:
        async with pool.connection(timeout=SNAPSHOT_TIMEOUT_SECONDS) as conn:
            samples = await metrics_snapshot(conn)
    except Exception as error:
        log.warning("metrics: cannot read the database's snapshot: %s", type(error).__name__)
        up = False
    snapshot = _Snapshot(samples, up, time.perf_counter() - started)
    return generate_latest(REGISTRY) + generate_latest(snapshot)
