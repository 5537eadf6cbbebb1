"""yuxi.metrics_snapshot() on threads in every state, the API's metrics text while the
database is unreachable, and a ``yuxi worker --metrics-port`` process serving its own."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from psycopg_pool import AsyncConnectionPool

from tests.integration.conftest import World
from tests.integration.worker_harness import wait_for_status
from yuxi.api.metrics import metrics_text
from yuxi.queue.metrics import MetricSample, metrics_snapshot
from yuxi.queue.runs import run_resume

# every metric the function returns, and the labels each one lists even at zero
EXPECTED = {
    "yuxi_runs": [{"status": s} for s in ("pending", "running", "cancel_requested")],
    "yuxi_run_oldest_pending_age_seconds": [{}],
    "yuxi_runs_undelivered": [{}],
    "yuxi_run_leases_expired": [{}],
    "yuxi_requests_queued": [{}],
    "yuxi_request_oldest_queued_age_seconds": [{}],
    "yuxi_threads": [{"status": s} for s in ("running", "interrupted", "paused")],
    "yuxi_threads_paused": [{"reason": r} for r in ("run_failed", "run_cancelled", "stalled")],
    "yuxi_maintenance_events_total": None,  # whatever rows yuxi.maintenance_counters has
    "yuxi_delivery_jobs": [
        {"status": s}
        for s in ("todo", "doing", "succeeded", "failed", "cancelled", "aborting", "aborted")
    ],
    "yuxi_workers": [{}],
    "yuxi_scheduled_occurrences_last_hour": [
        {"status": s} for s in ("submitted", "skipped", "failed", "pending_retry")
    ],
    "yuxi_scheduled_job_oldest_due_age_seconds": [{}],
}


def values(samples: list[MetricSample]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.metric, tuple(sorted(s.labels.items()))): s.value for s in samples}


def value(samples: list[MetricSample], metric: str, **labels: str) -> float:
    return values(samples)[(metric, tuple(sorted(labels.items())))]


async def snapshot(world: World, now: datetime | None = None) -> list[MetricSample]:
    async with world.pool.connection() as conn:
        return await metrics_snapshot(conn, now=now)


async def test_an_empty_database_lists_every_metric_at_zero(world: World) -> None:
    samples = await snapshot(world)
    by_metric: dict[str, list[dict[str, str]]] = {}
    for sample in samples:
        by_metric.setdefault(sample.metric, []).append(sample.labels)
        assert sample.type == ("counter" if sample.metric.endswith("_total") else "gauge")
        assert sample.help
    assert set(by_metric) == set(EXPECTED)
    for metric, labels in EXPECTED.items():
        if labels is not None:
            assert sorted(map(str, by_metric[metric])) == sorted(map(str, labels)), metric
    for sample in samples:
        if sample.metric != "yuxi_maintenance_events_total":
            assert sample.value == 0, sample
    counters = await world.fetch("SELECT name, value FROM yuxi.maintenance_counters")
    assert {s.labels["event"]: s.value for s in samples if s.labels.get("event")} == {
        name: float(count) for name, count in counters
    }


async def test_the_snapshot_follows_runs_queues_and_threads(world: World) -> None:
    # a pending run with one request queued behind it
    waiting = await world.thread()
    pending = await world.submit(waiting, "first")
    await world.submit(waiting, "second")
    # a running run
    busy = await world.thread()
    running = await world.claim((await world.submit(busy, "work")).run_id, lease=30)  # type: ignore[arg-type]
    # a failed run that paused its backlog
    broken = await world.thread()
    failing = await world.submit(broken, "fails")
    await world.submit(broken, "waits for continue")
    await world.finish(
        await world.claim(failing.run_id),  # type: ignore[arg-type]
        "failed",
        error_type="model_error",
        error_message="boom",
    )
    # an interrupted run, and one that was resumed (it stays interrupted, its thread not)
    asking = await world.thread()
    await world.finish(await world.claim((await world.submit(asking, "ask")).run_id), "interrupted")  # type: ignore[arg-type]
    resumed = await world.thread()
    answered = await world.claim((await world.submit(resumed, "ask")).run_id)  # type: ignore[arg-type]
    await world.finish(answered, "interrupted")
    async with world.pool.connection() as conn:
        await run_resume(conn, answered.run_id, resume="yes", uid=world.alice)
    await world.execute(
        "UPDATE yuxi.maintenance_counters SET value = 3 WHERE name = 'lease_expired'"
    )

    samples = await snapshot(world)
    assert value(samples, "yuxi_runs", status="pending") == 2  # waiting's and the resume run
    assert value(samples, "yuxi_runs", status="running") == 1
    assert value(samples, "yuxi_runs", status="cancel_requested") == 0
    assert value(samples, "yuxi_requests_queued") == 2
    assert value(samples, "yuxi_threads", status="running") == 3  # waiting, busy, resumed
    assert value(samples, "yuxi_threads", status="interrupted") == 1
    assert value(samples, "yuxi_threads", status="paused") == 1
    assert value(samples, "yuxi_threads_paused", reason="run_failed") == 1
    assert value(samples, "yuxi_threads_paused", reason="stalled") == 0
    assert value(samples, "yuxi_run_leases_expired") == 0
    assert value(samples, "yuxi_runs_undelivered") == 0
    assert value(samples, "yuxi_maintenance_events_total", event="lease_expired") == 3
    jobs = await world.fetch(
        "SELECT status::text, count(*) FROM procrastinate_jobs WHERE queue_name = 'yuxi_runs'"
        " GROUP BY status"
    )
    for status, count in jobs:
        assert value(samples, "yuxi_delivery_jobs", status=status) == count

    # ages and lease expiry, read at a later p_now
    oldest_run = await world.value(
        "SELECT min(created_at) FROM yuxi.agent_runs WHERE status = 'pending'"
    )
    oldest_request = await world.value(
        "SELECT min(created_at) FROM yuxi.agent_run_requests WHERE status = 'queued'"
    )
    later = max(oldest_run, oldest_request, running.lease_expires_at) + timedelta(seconds=100)
    samples = await snapshot(world, later)
    assert value(samples, "yuxi_run_oldest_pending_age_seconds") == pytest.approx(
        (later - oldest_run).total_seconds()
    )
    assert value(samples, "yuxi_request_oldest_queued_age_seconds") == pytest.approx(
        (later - oldest_request).total_seconds()
    )
    assert value(samples, "yuxi_run_leases_expired") == 1

    # a lost delivery
    await world.execute(
        "DELETE FROM procrastinate_jobs WHERE id = (SELECT delivery_job_id FROM yuxi.agent_runs"
        " WHERE run_id = %s)",
        pending.run_id,
    )
    assert value(await snapshot(world), "yuxi_runs_undelivered") == 1


async def test_the_snapshot_counts_the_last_hours_scheduled_fires(world: World) -> None:
    job = await world.value(
        "SELECT (yuxi.job_create(%s, %s, 'chatbot', 'tick', 'auto', '0 * * * *', 'UTC', true,"
        " now() - interval '5 minutes')).id",
        world.alice,
        world.project,
    )
    await world.fetch("SELECT yuxi.job_fire(%s, 'manual', now())", job)
    # an old failure: outside the hour
    await world.execute(
        "INSERT INTO yuxi.scheduled_job_occurrences"
        " (job_id, scheduled_for, trigger, status, config_snapshot, error, created_at)"
        " VALUES (%s, now() - interval '2 hours', 'schedule', 'failed', '{}', 'old',"
        "         now() - interval '2 hours')",
        job,
    )
    due = await world.value("SELECT next_fire_at FROM yuxi.scheduled_agent_jobs WHERE id = %s", job)
    now = due + timedelta(seconds=300)
    samples = await snapshot(world, now)
    assert value(samples, "yuxi_scheduled_occurrences_last_hour", status="submitted") == 1
    assert value(samples, "yuxi_scheduled_occurrences_last_hour", status="failed") == 0
    assert value(samples, "yuxi_scheduled_job_oldest_due_age_seconds") == pytest.approx(300)
    await world.execute("UPDATE yuxi.scheduled_agent_jobs SET enabled = false WHERE id = %s", job)
    samples = await snapshot(world, now)
    assert value(samples, "yuxi_scheduled_job_oldest_due_age_seconds") == 0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _families(text: str) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def _sample(families: dict[str, Any], name: str, **labels: str) -> float | None:
    for family in families.values():
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


async def test_the_metrics_text_says_the_database_is_down_and_keeps_the_rest() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        url = f"postgresql://postgres@127.0.0.1:{sock.getsockname()[1]}/postgres"
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            url, min_size=0, max_size=1, open=False
        )
        await pool.open()
        try:
            text = (await metrics_text(pool)).decode()
        finally:
            await pool.close()
    families = _families(text)
    assert _sample(families, "yuxi_database_up") == 0
    assert "yuxi_runs" not in families
    assert "process_cpu_seconds" in families or "python_info" in families


async def _scrape(url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=5.0) as client:
        response = await client.get(url)
    assert response.status_code == 200
    return _families(response.text)


async def test_a_worker_process_serves_its_metrics(
    world: World, db_url: str, tmp_path: Path
) -> None:
    port = _free_port()
    env = {**os.environ, "YUXI_DATABASE_URL": db_url, "YUXI_HOME": str(tmp_path)}
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "yuxi.cli",
        "worker",
        "--metrics-port",
        str(port),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                families = await _scrape(url)
                break
            except httpx.TransportError:
                assert worker.returncode is None, "the worker exited"
                assert time.monotonic() < deadline, "the worker's metrics did not answer"
                await asyncio.sleep(0.1)
        assert _sample(families, "yuxi_worker_runs_in_flight") == 0
        assert _sample(families, "yuxi_worker_reconnects_total", connection="database") == 0

        ok = await world.submit(await world.thread(), "hello")
        bad = await world.submit(await world.thread(), "/fail on purpose")
        assert await wait_for_status(world, ok.run_id, within=60) == "completed"
        assert await wait_for_status(world, bad.run_id, within=60) == "failed"

        # the histogram is observed after the run's status is committed: wait for it
        deadline = time.monotonic() + 30
        while True:
            families = await _scrape(url)
            counts = {
                status: _sample(families, "yuxi_worker_run_duration_seconds_count", status=status)
                for status in ("completed", "failed")
            }
            if counts == {"completed": 1, "failed": 1}:
                break
            assert time.monotonic() < deadline, counts
            await asyncio.sleep(0.1)
        assert _sample(families, "yuxi_worker_runs_in_flight") == 0
    finally:
        if worker.returncode is None:
            worker.terminate()
        await asyncio.wait_for(worker.wait(), 60)


async def test_a_worker_whose_metrics_port_is_taken_exits_with_a_message(
    db_url: str, tmp_path: Path
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env = {**os.environ, "YUXI_DATABASE_URL": db_url, "YUXI_HOME": str(tmp_path)}
        worker = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "yuxi.cli",
            "worker",
            "--metrics-port",
            str(taken.getsockname()[1]),
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, stderr = await asyncio.wait_for(worker.communicate(), 60)
    assert worker.returncode == 1
    assert b"cannot serve metrics on 127.0.0.1:" in stderr
