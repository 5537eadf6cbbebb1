"""Scale out: several `yuxi worker` processes on one database share the runs, and no run
is executed twice; FIFO holds on every conversation."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from tests.integration.conftest import World
from yuxi.models.secret_box import new_key

WORKERS = 3
THREADS = 8
PER_THREAD = 5


async def test_workers_share_the_load_and_never_run_a_run_twice(
    world: World, db_url: str, tmp_path: Path
) -> None:
    threads = [await world.thread() for _ in range(THREADS)]
    processes = []
    key = new_key()  # the hosts of one database share the server key
    for index in range(WORKERS):
        env = {
            **os.environ,
            "YUXI_DATABASE_URL": db_url,
            "YUXI_HOME": str(tmp_path / f"worker-{index}"),
            "YUXI_SECRET_KEY": key,
            "YUXI_WORKER_CONCURRENCY": "2",
        }
        processes.append(
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "yuxi.cli",
                "worker",
                env=env,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
        )
    try:
        for i in range(PER_THREAD):
            for thread in threads:
                await world.submit(thread, f"m{i}")
        for _ in range(600):  # up to 2 minutes
            done = await world.value(
                "SELECT count(*) FROM yuxi.agent_runs WHERE status = 'completed'"
            )
            if done == THREADS * PER_THREAD:
                break
            await asyncio.sleep(0.2)
    finally:
        for process in processes:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        await asyncio.gather(*(asyncio.wait_for(p.wait(), 60) for p in processes))
    # every run executed exactly once, by one attempt, with one reply
    attempts = await world.fetch(
        "SELECT r.run_id, count(a.*), count(DISTINCT m.id) FROM yuxi.agent_runs r"
        " JOIN yuxi.agent_run_attempts a ON a.run_id = r.run_id"
        " LEFT JOIN yuxi.messages m ON m.run_id = r.run_id AND m.role = 'assistant'"
        " GROUP BY r.run_id"
    )
    assert len(attempts) == THREADS * PER_THREAD
    assert {(n, replies) for _run, n, replies in attempts} == {(1, 1)}
    # the load was shared: more than one worker process executed runs
    workers = await world.value("SELECT count(DISTINCT worker) FROM yuxi.agent_run_attempts")
    assert workers >= 2, workers
    # FIFO on every conversation: replies in the order the messages were sent
    for thread in threads:
        rows = await world.fetch(
            "SELECT content FROM yuxi.messages WHERE thread_id = %s AND role = 'assistant'"
            " ORDER BY id",
            thread,
        )
        assert [r[0] for r in rows] == [f"echo: m{i}" for i in range(PER_THREAD)], rows
