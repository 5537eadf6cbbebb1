"""GET /metrics over real HTTP: Prometheus text that prometheus_client's parser reads,
HTTP requests counted under their route template, and the queue's state read from the
database at scrape time while a real worker runs."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.api.conftest import Api

pytestmark = pytest.mark.asyncio(loop_scope="module")


class Scrape:
    """One parsed GET /metrics."""

    def __init__(self, text: str) -> None:
        self.families = {family.name: family for family in text_string_to_metric_families(text)}
        self.samples = [sample for family in self.families.values() for sample in family.samples]

    def value(self, name: str, **labels: str) -> float:
        """The sample's value; 0 for a labelled series not created yet."""
        for sample in self.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
        return 0.0


async def scrape_until(api: Api, done: Callable[[Scrape], bool], within: float = 20.0) -> Scrape:
    """Scrapes until ``done`` holds (what a worker observes after a run's status is
    committed lags it by a moment)."""
    deadline = time.monotonic() + within
    while True:
        metrics = await scrape(api)
        if done(metrics):
            return metrics
        assert time.monotonic() < deadline, "the metrics did not show it in time"
        await asyncio.sleep(0.05)


async def scrape(api: Api) -> Scrape:
    response = await api.anon.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return Scrape(response.text)


async def test_metrics_need_no_token_and_parse(api: Api) -> None:
    metrics = await scrape(api)
    assert metrics.value("yuxi_database_up") == 1
    assert metrics.families["yuxi_runs"].type == "gauge"
    assert metrics.families["yuxi_maintenance_events"].type == "counter"
    assert metrics.families["yuxi_http_requests"].type == "counter"
    assert metrics.families["yuxi_http_request_duration_seconds"].type == "histogram"
    for family in metrics.families.values():
        assert family.documentation, family.name


async def test_http_requests_are_counted_by_route_template(api: Api) -> None:
    run_id = str(uuid.uuid4())
    before = await scrape(api)
    for _ in range(3):
        assert (await api.alice.get(f"/api/agent/runs/{run_id}")).status_code == 404
    assert (await api.anon.get(f"/no/such/{run_id}")).status_code == 404
    after = await scrape(api)

    route = {"method": "GET", "route": "/api/agent/runs/{run_id}"}
    assert after.value("yuxi_http_requests_total", **route, status="404") == (
        before.value("yuxi_http_requests_total", **route, status="404") + 3
    )
    assert after.value("yuxi_http_request_duration_seconds_count", **route) == (
        before.value("yuxi_http_request_duration_seconds_count", **route) + 3
    )
    unmatched = {"method": "GET", "route": "unmatched", "status": "404"}
    assert after.value("yuxi_http_requests_total", **unmatched) == (
        before.value("yuxi_http_requests_total", **unmatched) + 1
    )
    # the scrape before this one was counted too, under its own route
    assert after.value(
        "yuxi_http_requests_total", method="GET", route="/metrics", status="200"
    ) > before.value("yuxi_http_requests_total", method="GET", route="/metrics", status="200")
    # no id ever becomes a label
    for sample in after.samples:
        assert all(run_id not in value for value in sample.labels.values()), sample


async def test_a_queued_a_running_and_a_failed_run(api: Api, worker: Any) -> None:
    before = await scrape(api)
    assert before.value("yuxi_runs", status="running") == 0
    assert before.value("yuxi_requests_queued") == 0

    # a running run with a request queued behind it
    busy = await api.thread()
    sleeping = await api.submit(busy, "/sleep 60")
    queued = await api.submit(busy, "after the nap")
    await api.wait_run(sleeping["run_id"], {"running"})
    # a failed run that pauses the request behind it
    broken = await api.thread()
    failing = await api.submit(broken, "/fail on purpose")
    await api.submit(broken, "waits for continue")
    assert (await api.wait_run(failing["run_id"]))["status"] == "failed"

    failed_before = before.value("yuxi_worker_run_duration_seconds_count", status="failed")
    metrics = await scrape_until(
        api,
        lambda m: (
            m.value("yuxi_worker_run_duration_seconds_count", status="failed") > failed_before
        ),
    )
    assert metrics.value("yuxi_runs", status="running") == 1
    assert metrics.value("yuxi_runs", status="pending") == 0
    assert metrics.value("yuxi_requests_queued") == 2
    assert metrics.value("yuxi_request_oldest_queued_age_seconds") > 0
    assert metrics.value("yuxi_threads", status="running") == 1
    assert metrics.value("yuxi_threads", status="paused") == 1
    assert metrics.value("yuxi_threads_paused", reason="run_failed") == 1
    assert metrics.value("yuxi_workers") >= 1
    # the worker runs in this process, so its metrics are in this scrape too
    assert metrics.value("yuxi_worker_runs_in_flight") == 1
    assert (
        metrics.value("yuxi_worker_run_duration_seconds_count", status="failed")
        == failed_before + 1
    )

    response = await api.alice.post(f"/api/agent/runs/{sleeping['run_id']}/cancel")
    assert response.status_code in (200, 202), response.text
    assert (await api.wait_run(sleeping["run_id"]))["status"] == "cancelled"
    metrics = await scrape(api)
    assert metrics.value("yuxi_runs", status="running") == 0
    assert metrics.value("yuxi_threads_paused", reason="run_cancelled") == 1
    assert metrics.value("yuxi_requests_queued") == 2
    assert queued["status"] == "queued"
