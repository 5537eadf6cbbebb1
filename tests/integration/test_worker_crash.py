"""A worker killed with SIGKILL mid-run: the lease expires and another worker continues
the run, an infrastructure retry that spends nothing of the agent's max_run_attempts;
with no infrastructure retry allowed (YUXI_INFRA_RETRIES=0) the run fails exactly once,
the backlog pauses, and another worker carries on after continue."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tests.integration.conftest import World
from tests.integration.worker_harness import completed, running_worker, wait_for_status
from yuxi.queue.threads import thread_continue


async def _killed_mid_run(world: World, db_url: str, tmp_path: Path, query: str) -> Any:
    thread = await world.thread()
    info = await world.submit(thread, query)
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
    return thread, info, backlog


async def test_a_sigkilled_workers_run_is_continued_by_another_worker(
    world: World, db_url: str, tmp_path: Path
) -> None:
    thread, info, backlog = await _killed_mid_run(world, db_url, tmp_path, "/sleep 2")
    async with running_worker(db_url, tmp_path / "survivor"):
        assert await wait_for_status(world, info.run_id, within=30) == "completed"
        await completed(world, backlog.run_id or await _dispatched(world, backlog.request_id))
    assert await world.fetch(
        "SELECT attempt_count, infra_retries FROM yuxi.agent_runs WHERE run_id = %s", info.run_id
    ) == [(2, 1)]
    assert await world.value("SELECT max_run_attempts FROM yuxi.agents WHERE slug = 'chatbot'") == 1
    assert [
        o
        for (o,) in await world.fetch(
            "SELECT outcome FROM yuxi.agent_run_attempts WHERE run_id = %s ORDER BY attempt_no",
            info.run_id,
        )
    ] == ["lease_expired", "completed"]
    # the run replied once, and the queue moved on by itself
    assert await world.fetch(
        "SELECT content FROM yuxi.messages WHERE thread_id = %s AND role = 'assistant' ORDER BY id",
        thread,
    ) == [("slept 2",), ("echo: after the crash",)]


async def _dispatched(world: World, request_id: str) -> Any:
    for _ in range(200):
        run = await world.value(
            "SELECT dispatched_run_id FROM yuxi.agent_run_requests WHERE request_id = %s",
            request_id,
        )
        if run is not None:
            return run
        await asyncio.sleep(0.1)
    raise AssertionError(f"request {request_id} was not dispatched")


async def test_with_no_infrastructure_retry_a_sigkilled_workers_run_fails_once(
    world: World, db_url: str, tmp_path: Path
) -> None:
    thread, info, backlog = await _killed_mid_run(world, db_url, tmp_path, "/sleep 60")
    async with running_worker(db_url, tmp_path / "survivor", infra_retries=0):
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
