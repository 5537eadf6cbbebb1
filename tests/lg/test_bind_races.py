"""Binding an unbound thread to its agent under real concurrent connections: the first
runs of one thread create one conversation, and another agent is refused."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from psycopg import AsyncConnection

from tests.integration.conftest import World, world
from tests.integration.racing import failures, race, successes
from yuxi.queue.errors import AssistantMismatch
from yuxi.queue.lg import lg_run_submit, lg_thread_bind, lg_thread_create

__all__ = ["world"]


async def test_concurrent_first_runs_bind_one_conversation(world: World) -> None:
    async with world.pool.connection() as conn:
        thread = await lg_thread_create(
            conn, world.alice, thread_id=uuid4(), metadata={}, agent_slug=None, if_exists="raise"
        )

    async def first_run(conn: AsyncConnection[Any], i: int) -> Any:
        agent = "chatbot" if i % 5 else "private"  # private: visible to alice too
        async with conn.transaction():
            await lg_thread_bind(conn, world.alice, thread, agent)
            return await lg_run_submit(
                conn,
                world.alice,
                thread,
                query=f"m{i}",
                request_id=f"first-{i}",
                strategy="enqueue",
                model_spec=None,
                tool_approval_mode=None,
                metadata={},
                stream_modes=[],
            )

    results = await race(world.url, 20, first_run)
    agents = await world.fetch(
        "SELECT agent_slug FROM yuxi.conversations WHERE thread_id = %s", thread
    )
    assert len(agents) == 1
    bound = agents[0][0]
    # every run for the agent that won is in, every run for the other one is refused
    expected_ok = 16 if bound == "chatbot" else 4
    assert len(successes(results)) == expected_ok
    assert all(isinstance(e, AssistantMismatch) for e in failures(results))
    assert (
        await world.value(
            "SELECT count(*) FROM yuxi.agent_run_requests WHERE thread_id = %s", thread
        )
        == expected_ok
    )
    assert (
        await world.value("SELECT count(*) FROM yuxi.agent_runs WHERE thread_id = %s", thread) == 1
    )


async def test_another_users_thread_cannot_be_bound(world: World) -> None:
    async with world.pool.connection() as conn:
        thread = await lg_thread_create(
            conn, world.alice, thread_id=None, metadata={}, agent_slug=None, if_exists="raise"
        )
        try:
            await lg_thread_bind(conn, world.bob, thread, "chatbot")
        except Exception as error:
            assert type(error).__name__ == "NotFound"
        else:
            raise AssertionError("bob bound alice's thread")
    assert (
        await world.value("SELECT count(*) FROM yuxi.conversations WHERE thread_id = %s", thread)
        == 0
    )
