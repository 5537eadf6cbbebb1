"""SIGTERM: a worker stops taking runs, lets running ones finish within the grace
period, then gives the rest back for another attempt."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from tests.integration.conftest import World
from tests.integration.worker_harness import wait_for_status


async def _worker(db_url: str, home: Path, grace: float) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "YUXI_DATABASE_URL": db_url,
        "YUXI_HOME": str(home),
        "YUXI_SHUTDOWN_GRACE_SECONDS": str(grace),
        "YUXI_LEASE_SECONDS": "5",
        "YUXI_LEASE_RENEW_SECONDS": "1",
    }
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "yuxi.cli",
        "worker",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def test_a_run_that_fits_in_the_grace_period_completes(
    world: World, db_url: str, tmp_path: Path
) -> None:
    info = await world.submit(await world.thread(), "/sleep 1")
    worker = await _worker(db_url, tmp_path, grace=15)
    try:
        await wait_for_status(world, info.run_id, {"running"}, within=30)
        worker.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(worker.wait(), 20) == 0
    finally:
        if worker.returncode is None:
            worker.kill()
    assert await world.value(
        "SELECT status FROM yuxi.agent_runs WHERE run_id = %s", info.run_id
    ) == ("completed")


async def test_a_run_that_outlasts_the_grace_period_is_released(
    world: World, db_url: str, tmp_path: Path
) -> None:
    thread = await world.thread()
    info = await world.submit(thread, "/sleep 60")
    later = await world.submit(thread, "must wait its turn")
    worker = await _worker(db_url, tmp_path, grace=1)
    try:
        await wait_for_status(world, info.run_id, {"running"}, within=30)
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 20)
    finally:
        if worker.returncode is None:
            worker.kill()
    rows = await world.fetch(
        "SELECT r.status, a.outcome, a.detail FROM yuxi.agent_runs r"
        " JOIN yuxi.agent_run_attempts a ON a.run_id = r.run_id WHERE r.run_id = %s",
        info.run_id,
    )
    assert rows == [("pending", "released", "worker shutting down")]
    # a fresh delivery waits for the next worker; the backlog still waits behind it
    assert (
        await world.value(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo' AND queueing_lock = %s",
            f"run:{info.run_id}",
        )
        == 1
    )
    assert (
        await world.value(
            "SELECT status FROM yuxi.agent_run_requests WHERE request_id = %s", later.request_id
        )
        == "queued"
    )
