"""yuxi.lg_run_submit's interrupt strategy under real concurrent connections: the active
run is cancelled and the new request is the queue's head, atomically."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from tests.integration.conftest import World, world
from tests.integration.racing import failures, race
from yuxi.queue.errors import RunBusy
from yuxi.queue.lg import lg_run_submit

__all__ = ["world"]


async def _interrupt(conn: AsyncConnection[Any], world: World, thread: UUID, i: int) -> Any:
    return await lg_run_submit(
        conn,
        world.alice,
        thread,
        query=f"instead {i}",
        request_id=f"int-{i}",
        strategy="interrupt",
        model_spec=None,
        tool_approval_mode=None,
        metadata={},
        stream_modes=["values"],
    )


async def _queue_state(world: World, thread: UUID) -> tuple[Any, ...]:
    rows = await world.fetch(
        "SELECT status, paused_reason, queued_count FROM yuxi.thread_queues WHERE thread_id = %s",
        thread,
    )
    return rows[0]


async def test_concurrent_interrupts_of_a_running_run_leave_one_head(world: World) -> None:
    thread = await world.thread()
    first = await world.submit(thread, "/sleep 30")
    behind = await world.submit(thread, "behind")
    assert first.run_id is not None
    claimed = await world.claim(first.run_id)

    results = await race(world.url, 20, lambda conn, i: _interrupt(conn, world, thread, i))
    assert failures(results) == []
    assert await world.value(
        "SELECT status FROM yuxi.agent_runs WHERE run_id = %s", first.run_id
    ) == ("cancel_requested")
    queued = await world.fetch(
        "SELECT request_id, queue_policy FROM yuxi.agent_run_requests"
        " WHERE thread_id = %s AND status = 'queued'"
        " ORDER BY yuxi.request_queue_position(agent_run_requests)",
        thread,
    )
    # the latest interrupt is the head (a steer), the others were superseded; the
    # enqueued request keeps its place behind it
    assert len(queued) == 2 and queued[1] == (behind.request_id, "enqueue")
    head = queued[0][0]
    assert queued[0][1] == "steer"
    cancelled = await world.value(
        "SELECT count(*) FROM yuxi.agent_run_requests WHERE thread_id = %s"
        " AND request_id LIKE 'int-%%' AND status = 'cancelled'",
        thread,
    )
    assert cancelled == 19

    # the worker stops the run: it ends cancelled, and the head runs at once (no pause)
    await world.finish(claimed, "cancelled")
    dispatched = await world.fetch(
        "SELECT r.request_id, ar.status FROM yuxi.agent_runs ar"
        " JOIN yuxi.agent_run_requests r ON r.dispatched_run_id = ar.run_id"
        " WHERE ar.thread_id = %s AND yuxi.run_is_active(ar.status)",
        thread,
    )
    assert dispatched == [(head, "pending")]
    assert await _queue_state(world, thread) == ("running", None, 1)


async def test_concurrent_interrupts_of_pending_runs_keep_one_active_run(world: World) -> None:
    thread = await world.thread()
    await world.submit(thread, "first")  # pending: no worker claims it

    results = await race(world.url, 20, lambda conn, i: _interrupt(conn, world, thread, i))
    assert failures(results) == []
    active = await world.fetch(
        "SELECT request_id FROM yuxi.agent_runs WHERE thread_id = %s"
        " AND yuxi.run_is_active(status)",
        thread,
    )
    # each interrupt cancelled the pending run before it and took its place at once
    assert len(active) == 1
    assert (
        await world.value(
            "SELECT count(*) FROM yuxi.agent_run_requests"
            " WHERE thread_id = %s AND status = 'queued'",
            thread,
        )
        == 0
    )
    assert await _queue_state(world, thread) == ("running", None, 0)
    statuses = await world.fetch(
        "SELECT status, count(*) FROM yuxi.agent_runs WHERE thread_id = %s GROUP BY status"
        " ORDER BY status",
        thread,
    )
    assert dict(statuses) == {"cancelled": 20, "pending": 1}


async def test_an_interrupt_racing_the_runs_own_finish_still_runs_next(world: World) -> None:
    for attempt in range(10):
        thread = await world.thread()
        first = await world.submit(thread, "/sleep 30")
        assert first.run_id is not None
        claimed = await world.claim(first.run_id)

        async def act(
            conn: AsyncConnection[Any],
            i: int,
            thread: UUID = thread,
            attempt: int = attempt,
            claimed: Any = claimed,
        ) -> Any:
            if i == 0:
                return await _interrupt(conn, world, thread, attempt)
            return await world.complete(claimed)

        results = await race(world.url, 2, act)
        assert failures(results) == [], results
        run = await world.fetch(
            "SELECT ar.status FROM yuxi.agent_runs ar JOIN yuxi.agent_run_requests r"
            " ON r.dispatched_run_id = ar.run_id WHERE r.request_id = %s",
            f"int-{attempt}",
        )
        assert run == [("pending",)]  # dispatched, whichever came first
        assert (await _queue_state(world, thread))[:2] == ("running", None)


async def test_reject_stores_nothing_while_busy(world: World) -> None:
    thread = await world.thread()
    await world.submit(thread, "first")
    async with world.pool.connection() as conn:
        try:
            await lg_run_submit(
                conn,
                world.alice,
                thread,
                query="no",
                request_id="rejected-1",
                strategy="reject",
                model_spec=None,
                tool_approval_mode=None,
                metadata={},
                stream_modes=[],
            )
        except RunBusy:
            pass
        else:
            raise AssertionError("reject on a busy thread must raise run_busy")
    assert (
        await world.value(
            "SELECT count(*) FROM yuxi.agent_run_requests WHERE request_id = 'rejected-1'"
        )
        == 0
    )
    assert await world.value("SELECT count(*) FROM yuxi.messages WHERE content = 'no'") == 0


async def test_a_paused_backlog_is_continued_by_a_new_run(world: World) -> None:
    thread = await world.thread()
    first = await world.submit(thread, "/fail boom")
    waiting = await world.submit(thread, "waiting")
    assert first.run_id is not None
    await world.finish(await world.claim(first.run_id), "failed", error_message="boom")
    assert (await _queue_state(world, thread))[:2] == ("paused", "run_failed")
    async with world.pool.connection() as conn:
        await lg_run_submit(
            conn,
            world.alice,
            thread,
            query="next",
            request_id="after-pause",
            strategy="enqueue",
            model_spec=None,
            tool_approval_mode=None,
            metadata={},
            stream_modes=[],
        )
    rows = await world.fetch(
        "SELECT request_id, status FROM yuxi.agent_run_requests WHERE thread_id = %s"
        " ORDER BY created_at",
        thread,
    )
    assert rows[1:] == [(waiting.request_id, "dispatched"), ("after-pause", "queued")]
