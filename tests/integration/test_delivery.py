"""Delivery: the procrastinate job is part of the transaction that makes a run pending."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from uuid import UUID

import pytest
from procrastinate import App, PsycopgConnector
from psycopg import AsyncConnection

from tests.integration.conftest import World
from tests.integration.racing import failures, race
from yuxi.queue.maintenance import run_redeliver_orphans
from yuxi.queue.requests import request_submit


async def test_rolled_back_submit_leaves_no_job(world: World) -> None:
    thread = await world.thread()
    async with world.pool.connection() as conn:
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                info = await request_submit(conn, uid=world.alice, thread_id=thread, query="x")
                assert info.run_id is not None
                assert await (
                    await conn.execute("SELECT count(*) FROM procrastinate_jobs")
                ).fetchone() == (1,)
                raise RuntimeError("abort")
    counts = await world.fetch(
        "SELECT (SELECT count(*) FROM procrastinate_jobs), (SELECT count(*) FROM yuxi.agent_runs),"
        " (SELECT count(*) FROM yuxi.messages)"
    )
    assert counts == [(0, 0, 0)]


async def test_every_committed_pending_run_has_exactly_one_waiting_job(world: World) -> None:
    threads = [await world.thread() for _ in range(20)]

    async def submit(conn: AsyncConnection[Any], i: int) -> Any:
        return await request_submit(conn, uid=world.alice, thread_id=threads[i % 20], query=f"{i}")

    assert failures(await race(world.url, 60, submit)) == []
    rows = await world.fetch(
        "SELECT r.run_id, count(j.id) FROM yuxi.agent_runs r LEFT JOIN procrastinate_jobs j"
        " ON j.queueing_lock = 'run:' || r.run_id AND j.status = 'todo'"
        " AND j.task_name = 'execute_run' AND j.args->>'run_id' = r.run_id::text GROUP BY r.run_id"
    )
    assert len(rows) == 20
    assert {count for _, count in rows} == {1}


async def _orphan(world: World, how: str) -> UUID:
    info = await world.submit(await world.thread(), "x")
    assert info.run_id is not None
    statements = {
        "deleted": "DELETE FROM procrastinate_jobs",
        "finished": "UPDATE procrastinate_jobs SET status = 'failed'",
        "worker gone": "UPDATE procrastinate_jobs SET status = 'doing', worker_id = NULL",
    }
    await world.execute(statements[how])
    return info.run_id


@pytest.mark.parametrize("how", ["deleted", "finished", "worker gone"])
async def test_orphaned_pending_runs_are_redelivered_once(world: World, how: str) -> None:
    run_id = await _orphan(world, how)

    async def scan(conn: AsyncConnection[Any], i: int) -> Any:
        return await run_redeliver_orphans(conn)

    results = await race(world.url, 6, scan)
    assert failures(results) == []
    redelivered = [r for batch in results for r in batch]
    assert [r.run_id for r in redelivered] == [run_id]
    assert (
        await world.value(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo' AND queueing_lock = %s",
            f"run:{run_id}",
        )
        == 1
    )
    assert (
        await world.value("SELECT delivery_job_id FROM yuxi.agent_runs WHERE run_id = %s", run_id)
        == redelivered[0].job_id
    )
    async with world.pool.connection() as conn:
        assert await run_redeliver_orphans(conn) == []


async def test_delivered_runs_are_not_redelivered(world: World) -> None:
    info = await world.submit(await world.thread(), "x")
    assert info.run_id is not None
    async with world.pool.connection() as conn:
        assert await run_redeliver_orphans(conn) == []
    await world.claim(info.run_id)  # running: no longer the scan's business
    await world.execute("DELETE FROM procrastinate_jobs")
    async with world.pool.connection() as conn:
        assert await run_redeliver_orphans(conn) == []


async def test_a_procrastinate_worker_receives_the_delivery(world: World, db_url: str) -> None:
    """The seam with procrastinate: a job inserted by yuxi's SQL reaches a real worker."""
    received: list[str] = []
    app = App(connector=PsycopgConnector(conninfo=db_url))

    @app.task(name="execute_run", queue="yuxi_runs")
    async def execute_run(run_id: str) -> None:
        received.append(run_id)

    info = await world.submit(await world.thread(), "x")
    async with app.open_async():
        await asyncio.wait_for(
            app.run_worker_async(queues=["yuxi_runs"], wait=False, install_signal_handlers=False),
            timeout=30,
        )
    assert received == [str(info.run_id)]
    assert await world.value("SELECT status::text FROM procrastinate_jobs") == "succeeded"


async def test_submit_wakes_a_listener_on_commit(world: World, db_url: str) -> None:
    thread = await world.thread()
    async with await AsyncConnection.connect(db_url, autocommit=True) as listener:
        await listener.execute("LISTEN procrastinate_any_queue_v1")
        notifies = listener.notifies(timeout=10, stop_after=1)
        info = await world.submit(thread, "x")
        payloads = [n.payload async for n in notifies]
    job_id = await world.value(
        "SELECT delivery_job_id FROM yuxi.agent_runs WHERE run_id = %s", info.run_id
    )
    assert [json.loads(p) for p in payloads] == [{"type": "job_inserted", "job_id": job_id}]
