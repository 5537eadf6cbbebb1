"""Interrupted threads and resume."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from psycopg import AsyncConnection

from tests.integration.conftest import World
from tests.integration.racing import failures, race
from yuxi.queue.errors import (
    NotFound,
    RequestIdConflict,
    ResumeSuperseded,
    RunInterrupted,
    RunNotInterrupted,
)
from yuxi.queue.runs import run_request_cancel, run_resume


async def _interrupted_thread(world: World) -> tuple[UUID, UUID]:
    thread = await world.thread()
    info = await world.submit(thread, "/ask name?", model_spec="m:x", tool_approval_mode="ask")
    assert info.run_id is not None
    await world.finish(await world.claim(info.run_id), "interrupted")
    return thread, info.run_id


async def test_submit_to_an_interrupted_thread_is_refused_and_stores_nothing(world: World) -> None:
    thread, _ = await _interrupted_thread(world)
    before = await world.value("SELECT count(*) FROM yuxi.messages")
    with pytest.raises(RunInterrupted):
        await world.submit(thread, "new message")
    assert await world.value("SELECT count(*) FROM yuxi.messages") == before
    assert await world.value("SELECT count(*) FROM yuxi.agent_run_requests") == 1


async def test_concurrent_resumes_create_one_resume_run(world: World) -> None:
    thread, run_id = await _interrupted_thread(world)

    async def resume(conn: AsyncConnection[Any], i: int) -> Any:
        return await run_resume(conn, run_id, resume={"answer": "same"}, uid=world.alice)

    results = await race(world.url, 20, resume)
    assert failures(results) == []
    assert len({r.run_id for r in results}) == 1
    rows = await world.fetch(
        "SELECT run_type, created_by_run_id, status, input_payload->>'model_spec',"
        " input_payload->>'tool_approval_mode' FROM yuxi.agent_runs WHERE run_type = 'resume'"
    )
    assert rows == [("resume", run_id, "pending", "m:x", "ask")]
    # the thread takes new messages again once the resume run is the latest
    queued = await world.submit(thread, "after")
    assert queued.status == "queued"


async def test_concurrent_resumes_with_different_answers_keep_the_first(world: World) -> None:
    _, run_id = await _interrupted_thread(world)

    async def resume(conn: AsyncConnection[Any], i: int) -> Any:
        return await run_resume(conn, run_id, resume={"answer": i}, uid=world.alice)

    results = await race(world.url, 20, resume)
    won = [r for r in results if not isinstance(r, BaseException)]
    assert len(won) == 1, results
    assert all(isinstance(r, ResumeSuperseded) for r in failures(results))
    stored = await world.value(
        "SELECT input_payload->'resume' FROM yuxi.agent_runs WHERE run_type = 'resume'"
    )
    assert stored == {"answer": results.index(won[0])}
    # the winner's answer is a re-send; any other answer is still superseded
    async with world.pool.connection() as conn:
        assert await run_resume(conn, run_id, resume=stored, uid=world.alice) == won[0]
        with pytest.raises(ResumeSuperseded, match="another answer"):
            await run_resume(conn, run_id, resume={"answer": "late"}, uid=world.alice)


async def test_resume_with_request_id_is_idempotent(world: World) -> None:
    _, run_id = await _interrupted_thread(world)
    async with world.pool.connection() as conn:
        first = await run_resume(conn, run_id, resume="yes", uid=world.alice, request_id="r-1")
        again = await run_resume(conn, run_id, resume="no", uid=world.alice, request_id="r-1")
        assert again == first
        with pytest.raises(ResumeSuperseded):
            await run_resume(conn, run_id, resume="no", uid=world.alice, request_id="r-2")


async def test_resume_of_an_older_run_is_superseded(world: World) -> None:
    thread, run_id = await _interrupted_thread(world)
    async with world.pool.connection() as conn:
        resumed = await run_resume(conn, run_id, resume="a", uid=world.alice)
    assert resumed.run_id is not None
    await world.finish(await world.claim(resumed.run_id), "interrupted")
    # run_id is interrupted but no longer the latest: its resume exists; another request
    # id is superseded, the latest interrupted run resumes normally
    async with world.pool.connection() as conn:
        with pytest.raises(ResumeSuperseded):
            await run_resume(conn, run_id, resume="b", uid=world.alice, request_id="other")
        latest = await run_resume(conn, resumed.run_id, resume="c", uid=world.alice)
    assert latest.run_id not in (None, run_id, resumed.run_id)
    assert (
        await world.value("SELECT last_run_id FROM yuxi.conversations WHERE thread_id = %s", thread)
        == latest.run_id
    )


async def test_resume_of_a_completed_run_is_refused(world: World) -> None:
    thread = await world.thread()
    info = await world.submit(thread, "hi")
    assert info.run_id is not None
    await world.complete(await world.claim(info.run_id))
    async with world.pool.connection() as conn:
        with pytest.raises(RunNotInterrupted):
            await run_resume(conn, info.run_id, resume="x", uid=world.alice)
    older = info.run_id
    newer = await world.submit(thread, "again")
    assert newer.run_id is not None
    await world.finish(await world.claim(newer.run_id), "interrupted")
    async with world.pool.connection() as conn:
        with pytest.raises(ResumeSuperseded):
            await run_resume(conn, older, resume="x", uid=world.alice)


async def test_resume_checks_owner_and_request_id(world: World) -> None:
    thread, run_id = await _interrupted_thread(world)
    taken = await world.fetch("SELECT request_id FROM yuxi.agent_run_requests")
    async with world.pool.connection() as conn:
        with pytest.raises(NotFound):
            await run_resume(conn, run_id, resume="x", uid=world.bob)
        with pytest.raises(RequestIdConflict):
            await run_resume(conn, run_id, resume="x", uid=world.alice, request_id=taken[0][0])
    assert thread is not None


async def test_cancelling_an_already_resumed_run_changes_nothing(world: World) -> None:
    thread, run_id = await _interrupted_thread(world)
    async with world.pool.connection() as conn:
        resumed = await run_resume(conn, run_id, resume="a", uid=world.alice)
    await world.submit(thread, "queued behind the resume")
    async with world.pool.connection() as conn:
        assert await run_request_cancel(conn, run_id, uid=world.alice) == "interrupted"
    assert resumed.run_id is not None
    await world.complete(await world.claim(resumed.run_id))
    # the queue moved on: the request behind the resume run was dispatched
    assert (
        await world.value(
            "SELECT count(*) FROM yuxi.agent_runs WHERE thread_id = %s AND status = 'pending'",
            thread,
        )
        == 1
    )
