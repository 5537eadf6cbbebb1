"""Cancelling requests and runs, pausing and continuing the backlog."""

from __future__ import annotations

import pytest

from tests.integration.conftest import World
from yuxi.queue.errors import (
    IllegalTransition,
    NotFound,
    QueueNotPaused,
    RequestAlreadyDispatched,
    RunBusy,
)
from yuxi.queue.requests import request_cancel
from yuxi.queue.runs import run_create_subagent, run_get, run_request_cancel
from yuxi.queue.threads import thread_continue, thread_queue


async def test_cancel_a_queued_request(world: World) -> None:
    thread = await world.thread()
    running = await world.submit(thread, "first")
    queued = await world.submit(thread, "second")
    async with world.pool.connection() as conn:
        with pytest.raises(NotFound):
            await request_cancel(conn, queued.request_id, uid=world.bob)
        cancelled = await request_cancel(conn, queued.request_id, uid=world.alice)
        assert (cancelled.status, cancelled.queue_position) == ("cancelled", None)
        assert await request_cancel(conn, queued.request_id, uid=world.alice) == cancelled
        with pytest.raises(RequestAlreadyDispatched):
            await request_cancel(conn, running.request_id, uid=world.alice)
    assert (
        await world.value(
            "SELECT delivery_status FROM yuxi.messages WHERE id = %s", queued.message_id
        )
        == "cancelled"
    )
    assert running.run_id is not None
    await world.complete(await world.claim(running.run_id))
    assert await world.value("SELECT count(*) FROM yuxi.agent_runs") == 1


async def test_pending_never_claimed_run_is_cancelled_at_once(world: World) -> None:
    thread = await world.thread()
    info = await world.submit(thread, "x")
    assert info.run_id is not None
    async with world.pool.connection() as conn:
        assert await run_request_cancel(conn, info.run_id, uid=world.alice) == "cancelled"
    rows = await world.fetch(
        "SELECT r.status, m.delivery_status, j.status::text FROM yuxi.agent_runs r"
        " JOIN yuxi.messages m ON m.id = r.input_message_id"
        " JOIN procrastinate_jobs j ON j.id = r.delivery_job_id"
    )
    assert rows == [("cancelled", "cancelled", "cancelled")]
    assert await world.fetch("SELECT event, payload FROM yuxi.run_events") == [
        ("end", {"status": "cancelled"})
    ]
    # the thread is free again: nothing was queued behind it
    assert (await world.submit(thread, "y")).status == "dispatched"


async def test_running_run_is_cancel_requested_then_cancelled(world: World) -> None:
    thread = await world.thread()
    info = await world.submit(thread, "x")
    later = await world.submit(thread, "later")
    assert info.run_id is not None
    claimed = await world.claim(info.run_id)
    with pytest.raises(IllegalTransition):  # cancelled needs a committed cancel request
        await world.finish(claimed, "cancelled")
    async with world.pool.connection() as conn:
        assert await run_request_cancel(conn, info.run_id) == "cancel_requested"
        assert await run_request_cancel(conn, info.run_id) == "cancel_requested"
    run = await world.finish(claimed, "cancelled")
    assert run.status == "cancelled"
    async with world.pool.connection() as conn:
        queue = await thread_queue(conn, thread)
        assert queue is not None
        assert (queue.status, queue.paused_reason, queue.queued_count) == (
            "paused",
            "run_cancelled",
            1,
        )
        # cancelling the whole backlog un-pauses the thread
        await request_cancel(conn, later.request_id)
        queue = await thread_queue(conn, thread)
        assert queue is not None
        assert (queue.status, queue.can_continue) == ("ready", False)
        with pytest.raises(QueueNotPaused):
            await thread_continue(conn, thread)


async def test_continue_is_refused_while_a_run_is_active(world: World) -> None:
    thread = await world.thread()
    first = await world.submit(thread, "a")
    await world.submit(thread, "b")
    assert first.run_id is not None
    await world.finish(await world.claim(first.run_id), "failed", error_message="boom")
    async with world.pool.connection() as conn:
        run_id = await thread_continue(conn, thread, uid=world.alice)
        assert run_id is not None
        with pytest.raises(RunBusy):
            await thread_continue(conn, thread, uid=world.alice)


async def test_interrupted_run_can_be_cancelled_to_free_the_thread(world: World) -> None:
    thread = await world.thread()
    info = await world.submit(thread, "/ask")
    assert info.run_id is not None
    await world.finish(await world.claim(info.run_id), "interrupted")
    async with world.pool.connection() as conn:
        assert await run_request_cancel(conn, info.run_id, uid=world.alice) == "cancelled"
    # one `end`: written when it was interrupted, not again on cancel
    assert await world.value("SELECT count(*) FROM yuxi.run_events WHERE event = 'end'") == 1
    assert (await world.submit(thread, "next")).status == "dispatched"


async def test_cancel_cascades_to_child_runs(world: World) -> None:
    thread = await world.thread()
    info = await world.submit(thread, "parent")
    assert info.run_id is not None
    parent = await world.claim(info.run_id)
    async with world.pool.connection() as conn:
        pending_child = await run_create_subagent(
            conn, parent.run_id, parent.lease_token, agent_slug="helper"
        )
        running_child = await run_create_subagent(
            conn, parent.run_id, parent.lease_token, agent_slug="helper", run_input={"task": "t"}
        )
        with pytest.raises(NotFound):  # not a subagent
            await run_create_subagent(conn, parent.run_id, parent.lease_token, agent_slug="chatbot")
    await world.claim(running_child, worker="w2")
    async with world.pool.connection() as conn:
        assert await run_request_cancel(conn, parent.run_id, uid=world.alice) == "cancel_requested"
        assert (await run_get(conn, pending_child)).status == "cancelled"
        assert (await run_get(conn, running_child)).status == "cancel_requested"
    child = await world.value(
        "SELECT input_payload FROM yuxi.agent_runs WHERE run_id = %s", running_child
    )
    assert child == {"task": "t", "model_spec": "builtin:scripted", "tool_approval_mode": "auto"}


async def test_cancel_of_another_users_run_is_not_found(world: World) -> None:
    info = await world.submit(await world.thread(), "x")
    assert info.run_id is not None
    async with world.pool.connection() as conn:
        with pytest.raises(NotFound):
            await run_request_cancel(conn, info.run_id, uid=world.bob)
        with pytest.raises(NotFound):
            await run_get(conn, info.run_id, uid=world.bob)
    assert await world.value("SELECT status FROM yuxi.agent_runs") == "pending"


async def test_children_do_not_outlive_their_parent(world: World) -> None:
    info = await world.submit(await world.thread(), "parent")
    assert info.run_id is not None
    parent = await world.claim(info.run_id)
    async with world.pool.connection() as conn:
        child = await run_create_subagent(
            conn, parent.run_id, parent.lease_token, agent_slug="helper"
        )
    await world.complete(parent)
    async with world.pool.connection() as conn:
        assert (await run_get(conn, child)).status == "cancelled"


async def test_a_parent_being_cancelled_cannot_start_subagents(world: World) -> None:
    info = await world.submit(await world.thread(), "parent")
    assert info.run_id is not None
    parent = await world.claim(info.run_id)
    async with world.pool.connection() as conn:
        await run_request_cancel(conn, parent.run_id)
        with pytest.raises(IllegalTransition):
            await run_create_subagent(conn, parent.run_id, parent.lease_token, agent_slug="helper")
    assert await world.value("SELECT count(*) FROM yuxi.agent_runs") == 1


async def test_a_backlog_stalled_by_hand_can_be_continued(world: World) -> None:
    thread = await world.thread()
    first = await world.submit(thread, "first")
    second = await world.submit(thread, "second")
    # an operator cancels the pending run with a raw UPDATE, skipping the queue's
    # bookkeeping: the thread is left idle with a backlog and no pause
    await world.execute(
        "UPDATE yuxi.agent_runs SET status = 'cancelled', finished_at = now() WHERE run_id = %s",
        first.run_id,
    )
    async with world.pool.connection() as conn:
        queue = await thread_queue(conn, thread)
        assert queue is not None
        assert (queue.status, queue.paused_reason, queue.can_continue) == (
            "paused",
            "stalled",
            True,
        )
        run_id = await thread_continue(conn, thread)
    assert run_id is not None
    assert (
        await world.value(
            "SELECT dispatched_run_id FROM yuxi.agent_run_requests WHERE request_id = %s",
            second.request_id,
        )
        == run_id
    )
