"""Intake invariants under real concurrent connections."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from tests.integration.conftest import World
from tests.integration.racing import failures, race, successes
from yuxi.queue.errors import RequestIdConflict, SteerAlreadyPending
from yuxi.queue.requests import request_steer, request_submit


async def test_fifty_concurrent_resends_make_one_request(world: World) -> None:
    thread = await world.thread()

    async def submit(conn: AsyncConnection[Any], i: int) -> Any:
        return await request_submit(
            conn, uid=world.alice, thread_id=thread, query=f"text {i}", request_id="same"
        )

    results = await race(world.url, 50, submit)
    assert failures(results) == []
    assert len({(r.request_id, r.run_id, r.message_id) for r in results}) == 1
    counts = await world.fetch(
        "SELECT (SELECT count(*) FROM yuxi.agent_run_requests),"
        " (SELECT count(*) FROM yuxi.messages),"
        " (SELECT count(*) FROM yuxi.agent_runs), (SELECT count(*) FROM procrastinate_jobs)"
    )
    assert counts == [(1, 1, 1, 1)]


async def test_same_request_id_racing_on_other_threads_and_users(world: World) -> None:
    threads = [await world.thread() for _ in range(10)] + [
        await world.thread(world.bob) for _ in range(10)
    ]
    owners = [world.alice] * 10 + [world.bob] * 10

    async def submit(conn: AsyncConnection[Any], i: int) -> Any:
        return await request_submit(
            conn, uid=owners[i], thread_id=threads[i], query="x", request_id="contested"
        )

    results = await race(world.url, 20, submit)
    assert len(successes(results)) == 1
    assert all(isinstance(e, RequestIdConflict) for e in failures(results))
    assert await world.value("SELECT count(*) FROM yuxi.messages") == 1
    assert await world.value("SELECT count(*) FROM yuxi.agent_runs") == 1


async def test_hundred_concurrent_submits_keep_fifo(world: World) -> None:
    thread = await world.thread()

    async def submit(conn: AsyncConnection[Any], i: int) -> Any:
        return await request_submit(conn, uid=world.alice, thread_id=thread, query=f"m{i}")

    results = await race(world.url, 100, submit)
    assert failures(results) == []
    assert sum(r.status == "dispatched" for r in results) == 1

    # Queue positions are a permutation of 1..99 in head order.
    queued = await world.fetch(
        "SELECT request_id, yuxi.request_queue_position(r) FROM yuxi.agent_run_requests r"
        " WHERE status = 'queued' ORDER BY created_at, id"
    )
    assert [position for _, position in queued] == list(range(1, 100))

    # Drain the thread: each completion dispatches exactly the head, one run at a time.
    dispatched_order = []
    while True:
        active = await world.fetch(
            "SELECT run_id, request_id FROM yuxi.agent_runs WHERE thread_id = %s"
            " AND status IN ('pending', 'running', 'cancel_requested')",
            thread,
        )
        if not active:
            break
        assert len(active) == 1
        run_id, request_id = active[0]
        dispatched_order.append(request_id)
        await world.complete(await world.claim(run_id))
    head_order = await world.fetch(
        "SELECT request_id FROM yuxi.agent_run_requests WHERE thread_id = %s"
        " ORDER BY created_at, id",
        thread,
    )
    assert dispatched_order == [r for (r,) in head_order]
    assert len(dispatched_order) == 100


async def test_reject_while_busy_is_stored_rejected(world: World) -> None:
    thread = await world.thread()
    running = await world.submit(thread, "first")
    rejected = await world.submit(thread, "second", queue_policy="reject")
    assert rejected.status == "rejected"
    assert rejected.run_id is None
    assert (
        await world.value(
            "SELECT delivery_status FROM yuxi.messages WHERE id = %s", rejected.message_id
        )
        == "rejected"
    )
    # with a backlog but no active run (paused), reject still rejects
    await world.submit(thread, "queued")
    assert running.run_id is not None
    await world.finish(await world.claim(running.run_id), "failed", error_type="x")
    paused = await world.submit(thread, "third", queue_policy="reject")
    assert paused.status == "rejected"
    assert await world.value("SELECT count(*) FROM yuxi.agent_runs") == 1


async def test_racing_rejects_on_an_idle_thread_dispatch_exactly_one(world: World) -> None:
    thread = await world.thread()

    async def submit(conn: AsyncConnection[Any], i: int) -> Any:
        return await request_submit(
            conn, uid=world.alice, thread_id=thread, query=f"r{i}", queue_policy="reject"
        )

    results = await race(world.url, 30, submit)
    assert failures(results) == []
    assert sorted(r.status for r in results) == ["dispatched"] + ["rejected"] * 29
    assert await world.value("SELECT count(*) FROM yuxi.agent_runs") == 1
    assert (
        await world.value("SELECT count(*) FROM yuxi.messages WHERE delivery_status = 'rejected'")
        == 29
    )


async def test_steer_runs_next_and_only_one_may_wait(world: World) -> None:
    thread = await world.thread()
    first = await world.submit(thread, "first")
    await world.submit(thread, "queued 1")
    await world.submit(thread, "queued 2")
    steer = await world.submit(thread, "steer", queue_policy="steer")
    assert (steer.status, steer.queue_position) == ("queued", 1)
    positions = await world.fetch(
        "SELECT content, yuxi.request_queue_position(r) FROM yuxi.agent_run_requests r"
        " JOIN yuxi.messages m ON m.id = r.input_message_id WHERE r.status = 'queued'"
        " ORDER BY 2"
    )
    assert positions == [("steer", 1), ("queued 1", 2), ("queued 2", 3)]

    async def steer_again(conn: AsyncConnection[Any], i: int) -> Any:
        return await request_submit(
            conn, uid=world.alice, thread_id=thread, query=f"s{i}", queue_policy="steer"
        )

    results = await race(world.url, 10, steer_again)
    assert all(isinstance(e, SteerAlreadyPending) for e in results)

    assert first.run_id is not None
    await world.complete(await world.claim(first.run_id))
    head = await world.value(
        "SELECT r.request_id FROM yuxi.agent_runs r"
        " WHERE r.thread_id = %s AND r.status = 'pending'",
        thread,
    )
    assert head == steer.request_id


async def test_upgrading_queued_requests_to_steer_races_to_one(world: World) -> None:
    thread = await world.thread()
    await world.submit(thread, "running")
    queued = [await world.submit(thread, f"q{i}") for i in range(8)]

    async def upgrade(conn: AsyncConnection[Any], i: int) -> Any:
        return await request_steer(conn, queued[i].request_id, uid=world.alice)

    results = await race(world.url, 8, upgrade)
    won = successes(results)
    assert len(won) == 1
    assert won[0].queue_policy == "steer"
    assert won[0].request_id in {q.request_id for q in queued}
    assert all(isinstance(e, SteerAlreadyPending) for e in failures(results))
    # the upgraded request keeps its identity and message
    assert won[0].message_id in {q.message_id for q in queued}
