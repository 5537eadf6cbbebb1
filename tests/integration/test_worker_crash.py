"""A worker killed with SIGKILL mid-run: the lease expires, the run fails exactly once,
the backlog pauses, and another worker carries on after continue."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from tests.integration.conftest import World
from tests.integration.worker_harness import completed, running_worker, wait_for_status
from yuxi.queue.threads import thread_continue


async def test_sigkilled_worker_loses_its_run_and_another_takes_over(
    world: World, db_url: str, tmp_path: Path
) -> None:
    thread = await world.thread()
    info = await world.submit(thread, "/sleep 60")
    backlog = await world.submit(thread, "after the crash")
    env = {
        **os.environ,
        "YUXI_DATABASE_URL": db_url,
        "YUXI_HOME": str(tmp_path / "doomed"),
        "YUXI_LEASE_SECONDS": "2",
        "YUXI_LEASE_RENEW_SECONDS": "0.5",
    }
    doomed = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "yuxi.cli",
        "worker",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await wait_for_status(world, info.run_id, {"running"}, within=30)
        doomed.send_signal(signal.SIGKILL)
        await asyncio.wait_for(doomed.wait(), 10)
    finally:
        if doomed.returncode is None:
            doomed.kill()

    async with running_worker(db_url, tmp_path / "survivor"):
        assert await wait_for_status(world, info.run_id, within=30) == "failed"
        failed = await world.fetch(
            "SELECT error_type, attempt_count FROM yuxi.agent_runs WHERE run_id = %s", info.run_id
        )
        assert failed == [("worker_lease_expired", 1)]
        assert (
            await world.value("SELECT status FROM yuxi.thread_queues WHERE thread_id = %s", thread)
            == "paused"
        )
        async with world.pool.connection() as conn:
            next_run = await thread_continue(conn, thread, uid=world.alice)
        await completed(world, next_run)

    assert await world.fetch(
        "SELECT outcome, worker <> '' FROM yuxi.agent_run_attempts WHERE run_id = %s", info.run_id
    ) == [("lease_expired", True)]
    assert (
        await world.value(
            "SELECT dispatched_run_id FROM yuxi.agent_run_requests WHERE request_id = %s",
            backlog.request_id,
        )
        == next_run
    )
    # nothing ran twice: one attempt per run, one reply in the thread
    assert (
        await world.value(
            "SELECT max(attempt_count) FROM yuxi.agent_runs WHERE thread_id = %s", thread
        )
        == 1
    )
    assert (
        await world.value(
            "SELECT count(*) FROM yuxi.messages WHERE thread_id = %s AND role = 'assistant'", thread
        )
        == 1
    )
