"""The task tool: a chatbot delegates to a subagent through a child run, executed by a
real worker. The world has one subagent, `helper`, visible to everyone."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from uuid import UUID

import psycopg
import pytest

from tests.integration.conftest import World
from tests.integration.worker_harness import (
    completed,
    running_worker,
    wait_for_status,
    wait_until,
)
from yuxi.queue.runs import (
    ClaimedRun,
    run_create_subagent,
    run_release,
    run_request_cancel,
    run_retry,
)


def _task(subagent: str, description: str) -> str:
    return "/tool task " + json.dumps({"subagent": subagent, "description": description})


async def _reply(world: World, run_id: object) -> str:
    return str(
        await world.value(
            "SELECT m.content FROM yuxi.agent_runs r"
            " JOIN yuxi.messages m ON m.id = r.output_message_id WHERE r.run_id = %s",
            run_id,
        )
    )


async def _children(world: World, parent: UUID | None) -> list[tuple[object, ...]]:
    return await world.fetch(
        "SELECT run_id, agent_slug, run_type, status, manifest IS NOT NULL, request_id"
        " FROM yuxi.agent_runs WHERE created_by_run_id = %s",
        parent,
    )


async def test_a_task_runs_as_a_child_run_and_its_answer_is_the_tool_result(
    world: World, db_url: str, tmp_path: Path
) -> None:
    thread = await world.thread()
    async with running_worker(db_url, tmp_path):
        info = await world.submit(thread, _task("helper", "summarise the plan"))
        await completed(world, info.run_id)
    assert await _reply(world, info.run_id) == "tool task returned: echo: summarise the plan"
    [(child, slug, run_type, status, has_manifest, request_id)] = await _children(
        world, info.run_id
    )
    assert (slug, run_type, status, has_manifest) == ("helper", "subagent", "completed", True)
    assert request_id == info.request_id
    # one delivery path: the parent's worker executed it in one attempt, with no job
    assert await world.fetch(
        "SELECT delivery_job_id, attempt_count FROM yuxi.agent_runs WHERE run_id = %s", child
    ) == [(None, 1)]
    assert (
        await world.value(
            "SELECT count(*) FROM procrastinate_jobs WHERE queueing_lock = %s", f"run:{child}"
        )
        == 0
    )
    # the child has its own events, one end, and its own checkpoint thread
    ends = await world.value(
        "SELECT count(*) FROM yuxi.run_events WHERE run_id = %s AND event = 'end'", child
    )
    assert ends == 1
    assert await world.value("SELECT count(*) FROM checkpoints WHERE thread_id = %s", str(child))
    assert await _reply(world, child) == "echo: summarise the plan"
    # one attempt: the delivery job found the child already claimed by its parent's worker
    attempts = await world.value(
        "SELECT count(*) FROM yuxi.agent_run_attempts WHERE run_id = %s", child
    )
    assert attempts == 1


async def test_an_unknown_or_unlisted_subagent_is_a_tool_error_not_a_child_run(
    world: World, db_url: str, tmp_path: Path
) -> None:
    thread = await world.thread()
    async with running_worker(db_url, tmp_path):
        info = await world.submit(thread, _task("nobody", "anything"))
        await completed(world, info.run_id)
    reply = await _reply(world, info.run_id)
    assert reply == "tool task returned: subagent nobody is not available (available: helper)"
    assert await _children(world, info.run_id) == []


async def test_without_visible_subagents_there_is_no_task_tool(
    world: World, db_url: str, tmp_path: Path
) -> None:
    await world.execute("UPDATE yuxi.agents SET is_subagent = false WHERE slug = 'helper'")
    thread = await world.thread()
    async with running_worker(db_url, tmp_path):
        info = await world.submit(thread, _task("helper", "anything"))
        await completed(world, info.run_id)
    assert await _reply(world, info.run_id) == "tool task is not available"


async def test_cancelling_the_parent_cancels_the_child(
    world: World, db_url: str, tmp_path: Path
) -> None:
    thread = await world.thread()
    async with running_worker(db_url, tmp_path):
        info = await world.submit(thread, _task("helper", "/sleep 30"))

        async def child_running() -> bool:
            rows = await _children(world, info.run_id)
            return bool(rows) and rows[0][3] == "running"

        await wait_until(child_running)
        async with world.pool.connection() as conn:
            await run_request_cancel(conn, info.run_id, uid=world.alice)
        assert await wait_for_status(world, info.run_id, within=5) == "cancelled"
        [(child, *_)] = await _children(world, info.run_id)
        assert await wait_for_status(world, child, within=5) == "cancelled"


async def test_a_child_runs_usage_is_its_own_and_the_threads_includes_it(
    world: World, db_url: str, tmp_path: Path
) -> None:
    thread = await world.thread()
    async with running_worker(db_url, tmp_path):
        info = await world.submit(thread, _task("helper", "count these four words"))
        await completed(world, info.run_id)
    [(child, *_)] = await _children(world, info.run_id)
    usage = dict(
        (run_id, (inputs, outputs))
        for run_id, inputs, outputs in await world.fetch(
            "SELECT run_id, input_tokens, output_tokens FROM yuxi.run_usage WHERE thread_id = %s",
            thread,
        )
    )
    # the child answered once: "echo: count these four words" is 5 words
    assert usage[child][1] == 5 and usage[child][0] >= 4
    # the parent called its model twice (the task call, then the answer to its result)
    assert usage[info.run_id][1] > 0 and set(usage) == {info.run_id, child}
    total = await world.value("SELECT yuxi.thread_usage(%s, %s)", world.alice, thread)
    assert total["output_tokens"] == usage[child][1] + usage[info.run_id][1]
    with pytest.raises(psycopg.Error) as refused:  # another user's thread does not exist
        await world.value("SELECT yuxi.thread_usage(%s, %s)", world.bob, thread)
    assert refused.value.sqlstate == "YN001"


async def _child_of_a_running_parent(world: World) -> tuple[ClaimedRun, UUID]:
    await world.execute("UPDATE yuxi.agents SET max_run_attempts = 3 WHERE slug = 'chatbot'")
    info = await world.submit(await world.thread(), "delegate")
    assert info.run_id is not None
    parent = await world.claim(info.run_id, lease=0.2)
    async with world.pool.connection() as conn:
        child = await run_create_subagent(
            conn, parent.run_id, parent.lease_token, agent_slug="helper", run_input={"task": "t"}
        )
    return parent, child


async def test_a_child_run_waits_for_its_parent_not_for_a_delivery(world: World) -> None:
    """No delivery job, and the recovery scan leaves it alone: only its parent's worker
    executes it."""
    _, child = await _child_of_a_running_parent(world)
    assert (
        await world.value("SELECT delivery_job_id FROM yuxi.agent_runs WHERE run_id = %s", child)
        is None
    )
    assert (
        await world.value("SELECT count(*) FROM yuxi.undelivered_runs WHERE run_id = %s", child)
        == 0
    )
    assert await world.fetch("SELECT * FROM yuxi.run_redeliver_orphans()") == []


@pytest.mark.parametrize("how", ["release", "retry", "lease_expired"])
async def test_a_parent_given_back_for_another_attempt_cancels_its_children(
    world: World, how: str
) -> None:
    parent, child = await _child_of_a_running_parent(world)
    async with world.pool.connection() as conn:
        if how == "release":
            await run_release(conn, parent.run_id, parent.lease_token, reason="shutdown")
        elif how == "retry":
            await run_retry(
                conn, parent.run_id, parent.lease_token, error_type="x", error_message="cut"
            )
        else:
            await asyncio.sleep(0.3)
            await conn.execute("SELECT * FROM yuxi.run_reconcile_expired()")
    statuses = dict(
        await world.fetch(
            "SELECT run_id, status FROM yuxi.agent_runs WHERE run_id = ANY(%s)",
            [parent.run_id, child],
        )
    )
    assert statuses == {parent.run_id: "pending", child: "cancelled"}
