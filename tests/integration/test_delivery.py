"""Delivery: the procrastinate job is part of the transaction that makes a run pending."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from procrastinate import App, PsycopgConnector
from psycopg import AsyncConnection

from tests.integration.conftest import World
from tests.integration.racing import failures, race
from yuxi.queue.errors import InvalidInput
from yuxi.queue.maintenance import delivery_prune, run_redeliver_orphans, run_redeliver_stalled
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


async def _counter(world: World, name: str) -> int:
    return int(
        await world.value("SELECT value FROM yuxi.maintenance_counters WHERE name = %s", name)
    )


async def _worker_row(world: World, heartbeat_age: float) -> int:
    """A procrastinate worker whose last heartbeat was ``heartbeat_age`` seconds ago."""
    return int(
        await world.value(
            "INSERT INTO procrastinate_workers (last_heartbeat)"
            " VALUES (now() - make_interval(secs => %s)) RETURNING id",
            heartbeat_age,
        )
    )


async def _fetched_by(world: World, worker_id: int) -> UUID:
    """A pending run whose delivery job ``worker_id`` fetched (and has not claimed)."""
    info = await world.submit(await world.thread(), "x")
    assert info.run_id is not None
    await world.execute(
        "UPDATE procrastinate_jobs SET status = 'doing', worker_id = %s"
        " WHERE id = (SELECT delivery_job_id FROM yuxi.agent_runs WHERE run_id = %s)",
        worker_id,
        info.run_id,
    )
    return info.run_id


async def test_orphans_are_counted_by_what_became_of_their_job(world: World) -> None:
    deleted = await world.submit(await world.thread(), "x")
    finished = await world.submit(await world.thread(), "x")
    jobs = "SELECT delivery_job_id FROM yuxi.agent_runs WHERE run_id = %s"
    await world.execute(f"DELETE FROM procrastinate_jobs WHERE id = ({jobs})", deleted.run_id)
    await world.execute(
        f"UPDATE procrastinate_jobs SET status = 'failed' WHERE id = ({jobs})", finished.run_id
    )
    gone = await _worker_row(world, 0)
    pruned = await _fetched_by(world, gone)
    await world.execute("DELETE FROM procrastinate_workers WHERE id = %s", gone)
    async with world.pool.connection() as conn:
        redelivered = {r.run_id for r in await run_redeliver_orphans(conn)}
    assert redelivered == {deleted.run_id, finished.run_id, pruned}
    assert (
        await _counter(world, "redelivered_missing"),
        await _counter(world, "redelivered_stalled"),
    ) == (2, 1)
    # the lost jobs went with their re-delivery: one waiting job per pending run is left
    assert await world.fetch(
        "SELECT status::text, count(*) FROM procrastinate_jobs GROUP BY status"
    ) == [("todo", 3)]


async def test_a_delivery_held_by_a_silent_worker_is_redelivered_once(world: World) -> None:
    silent = await _worker_row(world, 60)
    alive = await _worker_row(world, 1)
    stalled = await _fetched_by(world, silent)
    await _fetched_by(world, alive)  # its worker still heartbeats: left alone
    stalled_job = await world.value(
        "SELECT delivery_job_id FROM yuxi.agent_runs WHERE run_id = %s", stalled
    )

    async def scan(conn: AsyncConnection[Any], i: int) -> Any:
        return await run_redeliver_stalled(conn, stalled_seconds=30)

    results = await race(world.url, 6, scan)
    assert failures(results) == []
    redelivered = [r for batch in results for r in batch]
    assert [r.run_id for r in redelivered] == [stalled]
    assert await world.fetch(
        "SELECT j.status::text FROM yuxi.agent_runs r JOIN procrastinate_jobs j"
        " ON j.id = r.delivery_job_id WHERE r.run_id = %s",
        stalled,
    ) == [("todo",)]
    assert (
        await world.value("SELECT count(*) FROM procrastinate_jobs WHERE id = %s", stalled_job) == 0
    )
    assert await _counter(world, "redelivered_stalled") == 1
    async with world.pool.connection() as conn:
        assert await run_redeliver_stalled(conn, stalled_seconds=30) == []
        # time is the caller's: a minute later, the other worker is silent too
        later = await run_redeliver_stalled(
            conn, stalled_seconds=30, now=datetime.now(UTC) + timedelta(minutes=1)
        )
        assert len(later) == 1
        with pytest.raises(InvalidInput):
            await run_redeliver_stalled(conn, stalled_seconds=0)


async def test_a_claimed_run_is_not_redelivered_for_its_stalled_job(world: World) -> None:
    silent = await _worker_row(world, 60)
    run_id = await _fetched_by(world, silent)
    await world.claim(run_id)
    async with world.pool.connection() as conn:
        assert await run_redeliver_stalled(conn) == []
        assert await run_redeliver_orphans(conn) == []


async def test_prune_keeps_the_job_table_to_the_work_in_flight(world: World) -> None:
    silent = await _worker_row(world, 60)
    alive = await _worker_row(world, 1)
    waiting = await world.submit(await world.thread(), "x")  # todo: kept
    held = await _fetched_by(world, alive)  # doing under a live worker: kept
    lost = await _fetched_by(world, silent)  # pending, stalled: the re-delivery's, kept
    moved_on = await _fetched_by(world, silent)  # claimed since (a rebuilt worker): pruned
    await world.claim(moved_on)
    finished = await world.submit(await world.thread(), "y")
    await world.execute(
        "UPDATE procrastinate_jobs SET status = 'failed'"
        " WHERE id = (SELECT delivery_job_id FROM yuxi.agent_runs WHERE run_id = %s)",
        finished.run_id,
    )
    await world.execute(
        "INSERT INTO procrastinate_jobs (queue_name, task_name, args, status, worker_id) VALUES"
        " ('yuxi_maintenance', 'yuxi_tick_schedules', '{}', 'succeeded', NULL),"
        " ('yuxi_maintenance', 'yuxi_tick_schedules', '{}', 'doing', %s),"
        " ('yuxi_maintenance', 'yuxi_tick_schedules', '{}', 'doing', %s),"
        " ('other_queue', 'other', '{}', 'failed', NULL)",
        silent,
        alive,
    )

    async def prune(conn: AsyncConnection[Any], i: int) -> Any:
        return await delivery_prune(conn)

    results = await race(world.url, 4, prune)
    assert failures(results) == []
    assert sum(results) == 3  # type: ignore[arg-type]
    kept = await world.fetch(
        "SELECT coalesce(args->>'run_id', task_name), status::text FROM procrastinate_jobs"
        " ORDER BY id"
    )
    assert kept == [
        (str(waiting.run_id), "todo"),
        (str(held), "doing"),
        (str(lost), "doing"),
        (str(finished.run_id), "failed"),  # its run is pending: the orphan scan's
        ("yuxi_tick_schedules", "doing"),
        ("other", "failed"),  # not yuxi's queue
    ]
    assert await _counter(world, "delivery_pruned") == 3


async def test_prune_drops_jobs_whose_end_a_live_worker_could_not_record(world: World) -> None:
    """A worker that lost its connection while recording a job's end leaves the job
    `doing` although it heartbeats: a delivery whose run ended 30 s ago, or a
    maintenance job started five minutes ago, is pruned anyway."""
    later = datetime.now(UTC) + timedelta(minutes=10)
    alive = int(
        await world.value(
            "INSERT INTO procrastinate_workers (last_heartbeat) VALUES (%s) RETURNING id", later
        )
    )
    ended = await _fetched_by(world, alive)
    await world.complete(await world.claim(ended))
    running = await _fetched_by(world, alive)
    await world.claim(running)
    await world.execute(
        "INSERT INTO procrastinate_jobs (queue_name, task_name, args, status)"
        " VALUES ('yuxi_maintenance', 'yuxi_tick_schedules', '{}', 'todo')"
    )
    await world.execute(
        "UPDATE procrastinate_jobs SET status = 'doing', worker_id = %s"
        " WHERE task_name = 'yuxi_tick_schedules'",
        alive,
    )
    async with world.pool.connection() as conn:
        assert await delivery_prune(conn) == 0  # now: nothing is late yet
        assert await delivery_prune(conn, now=later) == 2
    assert await world.value("SELECT args->>'run_id' FROM procrastinate_jobs") == str(running)


async def _announced(db_url: str, run_id: UUID, last: int, first: int | None) -> str:
    async with await AsyncConnection.connect(db_url, autocommit=True) as listener:
        await listener.execute("LISTEN yuxi_run_events")
        notifies = listener.notifies(timeout=10, stop_after=1)
        async with await AsyncConnection.connect(db_url, autocommit=True) as conn:
            await conn.execute("SELECT yuxi.run_events_announce(%s, %s, %s)", (run_id, last, first))
        (payload,) = [n.payload async for n in notifies]
        return payload


async def test_an_announcement_carries_the_events_as_streams_read_them(
    world: World, db_url: str
) -> None:
    thread = await world.thread()
    info = await world.submit(thread, "x")
    assert info.run_id is not None
    claimed = await world.claim(info.run_id)
    # payloads with what JSON text escapes: a tab, a newline, quotes, non-ASCII
    texts = ["a\tb", "line\nbreak", 'say "hi"', "你好", "x" * 3000, "y" * 3000, "z" * 3000]
    events = [{"event": "messages", "payload": {"chunks": [{"text": t}]}} for t in texts]
    last = await world.value(
        "SELECT yuxi.run_append_events(%s, %s, %s::jsonb, p_notify => false)",
        info.run_id,
        claimed.lease_token,
        json.dumps(events),
    )
    assert last == 7
    stored = await world.fetch(
        "SELECT seq, event, payload FROM yuxi.run_stream_read(%s, 0) ORDER BY seq", info.run_id
    )

    def carried(payload: str, last: int) -> list[tuple[int, str, str]]:
        head, *lines = payload.split("\n")
        assert head == f"{info.run_id} {last}"
        return [(int(s), e, p) for s, e, p in (line.split("\t") for line in lines)]

    assert carried(await _announced(db_url, info.run_id, 4, 2), 4) == [
        tuple(r) for r in stored[1:4]
    ]
    # not all fit in a notification: the newest that do, in order, under 8,000 bytes
    full = await _announced(db_url, info.run_id, 7, 1)
    assert len(full.encode()) < 7_900
    assert carried(full, 7) == [tuple(r) for r in stored[5:]]
    # none asked for, or the newest alone too big: the bare notification
    assert await _announced(db_url, info.run_id, 7, None) == f"{info.run_id} 7"
    await world.value(
        "SELECT yuxi.run_append_events(%s, %s, %s::jsonb, p_notify => false)",
        info.run_id,
        claimed.lease_token,
        json.dumps([{"event": "messages", "payload": {"text": "w" * 9000}}]),
    )
    assert await _announced(db_url, info.run_id, 8, 8) == f"{info.run_id} 8"
