"""Durable attempts with real processes and real faults: a run cut by a killed worker or
by killed database connections continues from its checkpoint in a new attempt, without
repeating a completed tool call, without sending its input again, without announcing an
event twice, and without spending its agent's max_run_attempts; a model that fails is
the agent's own failure, retried only within max_run_attempts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg

from tests.integration.conftest import World
from tests.integration.test_worker import saver
from tests.integration.worker_harness import (
    WorkerProcess,
    backend_waiting,
    running_worker,
    terminate_backends,
    wait_for_status,
)
from yuxi.files.store import PostgresFileStore
from yuxi.files.workspace import MEMORY_FILE

# Stalls the first checkpoint written after a run edited MEMORY.md: the worker that
# writes it is killed there, after the tool call's effect committed.
_STALL_AFTER_TOOL = """
CREATE SEQUENCE public.stall_once;
CREATE FUNCTION public.stall_after_tool() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM yuxi.files f
               WHERE f.path = 'agents/MEMORY.md' AND f.written_by_run IS NOT NULL) THEN
        IF nextval('public.stall_once') = 1 THEN
            PERFORM pg_sleep(120);
        END IF;
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER stall_after_tool AFTER INSERT ON public.checkpoints
    FOR EACH ROW EXECUTE FUNCTION public.stall_after_tool();
"""


async def _events(world: World, run_id: UUID) -> list[tuple[str, dict[str, Any]]]:
    return [
        (event, payload)
        for event, payload in await world.fetch(
            "SELECT event, payload FROM yuxi.run_events WHERE run_id = %s ORDER BY seq", run_id
        )
    ]


async def test_a_killed_workers_run_resumes_after_its_tool_call_without_repeating_it(
    world: World, db_url: str, tmp_path: Path
) -> None:
    await world.execute(
        'UPDATE yuxi.agents SET config_json = \'{"context": {"model": "builtin:scripted",'
        " \"enable_memory\": true}}' WHERE slug = 'chatbot'"
    )
    store = PostgresFileStore(world.pool)
    tree = await store.workspace_tree(world.alice)
    await store.write(tree, MEMORY_FILE, b"- likes tea\n")
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute(_STALL_AFTER_TOOL)  # type: ignore[arg-type]
    thread = await world.thread()
    query = '/tool memory_append {"text": "- has a cat"}'
    info = await world.submit(thread, query)
    assert info.run_id is not None
    doomed = WorkerProcess(db_url, tmp_path / "doomed", YUXI_LEASE_SECONDS="2")
    await doomed.start()
    try:
        stalled = await backend_waiting(db_url, "wait_event = 'PgSleep'", within=60)
        doomed.kill()
        assert doomed.process is not None
        await asyncio.wait_for(doomed.process.wait(), 10)
    finally:
        await doomed.stop()
    assert await terminate_backends(db_url, f"pid = {stalled}") == 1

    async with running_worker(db_url, tmp_path / "survivor"):
        assert await wait_for_status(world, info.run_id, within=60) == "completed"

    # the memory was appended to once, by the first attempt
    memory = await store.read(tree, MEMORY_FILE, limit=1 << 16)
    assert memory is not None and memory.decode().count("- has a cat") == 1
    assert await world.fetch(
        "SELECT call_id, tool, attempt_no FROM yuxi.run_tool_calls WHERE run_id = %s",
        info.run_id,
    ) == [("call_1", "memory", 1)]
    assert await world.fetch(
        "SELECT attempt_count, infra_retries FROM yuxi.agent_runs WHERE run_id = %s", info.run_id
    ) == [(2, 1)]
    assert await world.value("SELECT max_run_attempts FROM yuxi.agents WHERE slug = 'chatbot'") == 1

    # the input reached the graph once; the run stored what all its attempts produced
    async with saver(db_url) as checkpointer:
        saved = await checkpointer.aget_tuple({"configurable": {"thread_id": str(thread)}})
    assert saved is not None
    history = saved.checkpoint["channel_values"]["messages"]
    assert [m.content for m in history if m.type == "human"] == [query]
    assert [m.type for m in history] == ["human", "ai", "tool", "ai"]
    stored = await world.fetch(
        "SELECT role, content FROM yuxi.messages WHERE run_id = %s AND role <> 'user' ORDER BY id",
        info.run_id,
    )
    assert [role for role, _ in stored] == ["assistant", "tool", "assistant"]
    assert stored[-1][1].startswith("tool memory_append returned: appended to agents/MEMORY.md")
    async with await psycopg.AsyncConnection.connect(db_url) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM checkpoints WHERE thread_id = %s"
            " AND metadata->>'yuxi_run_id' = %s",
            (str(thread), str(info.run_id)),
        )
        tagged = await cur.fetchone()
    assert tagged is not None and tagged[0] > 0

    # every event once: one call and one result, a metadata event per attempt, one end
    events = await _events(world, info.run_id)
    names = [e for e, _ in events]
    assert names.count("metadata") == 2 and names.count("end") == 1 and names[-1] == "end"
    tools = [p for e, p in events if e == "tool"]
    assert [(t["type"], t.get("tool_call_id") or t["calls"][0]["id"]) for t in tools] == [
        ("call", "call_1"),
        ("result", "call_1"),
    ]
    texts = [c["text"] for e, p in events if e == "messages" for c in p["chunks"]]
    assert "".join(texts).count("tool memory_append returned") == 1


async def test_a_run_whose_connections_are_killed_three_times_completes(
    world: World, db_url: str, tmp_path: Path
) -> None:
    """Each attempt's checkpointer query is cut (pg_terminate_backend while it waits
    for a lock the test holds); the fourth attempt completes within the default
    infrastructure limit (3), its agent's max_run_attempts (1) untouched."""
    thread = await world.thread()
    async with running_worker(db_url, tmp_path):
        async with await psycopg.AsyncConnection.connect(db_url) as holder:
            await holder.execute("LOCK TABLE public.checkpoints IN ACCESS EXCLUSIVE MODE")
            info = await world.submit(thread, "hello")
            cut: list[int] = []
            for _ in range(3):  # each attempt's checkpointer query waits, and is cut
                waiting = await backend_waiting(
                    db_url,
                    "wait_event_type = 'Lock' AND query ILIKE '%checkpoint%'"
                    + "".join(f" AND pid <> {pid}" for pid in cut),
                    within=30,
                )
                assert await terminate_backends(db_url, f"pid = {waiting}") == 1
                cut.append(waiting)
            await holder.rollback()
        assert await wait_for_status(world, info.run_id, within=60) == "completed"
    assert await world.fetch(
        "SELECT attempt_count, infra_retries, error_type FROM yuxi.agent_runs WHERE run_id = %s",
        info.run_id,
    ) == [(4, 3, None)]
    outcomes = await world.fetch(
        "SELECT outcome, split_part(detail, ':', 1) FROM yuxi.agent_run_attempts"
        " WHERE run_id = %s ORDER BY attempt_no",
        info.run_id,
    )
    assert outcomes == [("released", "database_unavailable")] * 3 + [("completed", None)]
    assert await world.value("SELECT max_run_attempts FROM yuxi.agents WHERE slug = 'chatbot'") == 1
    names = [e for e, _ in await _events(world, info.run_id)]
    assert names.count("metadata") == 4 and names.count("end") == 1
    assert "error" not in names


async def test_a_failing_model_is_the_agents_own_failure(
    world: World, db_url: str, tmp_path: Path
) -> None:
    """Not retried as infrastructure: with max_run_attempts 1 the run fails in its first
    attempt; with 2 it gets one more (continuing from its checkpoint), then fails, the
    error event written once, at the end."""
    thread = await world.thread()
    once = await world.submit(thread, "/fail the model is down")
    async with running_worker(db_url, tmp_path):
        assert await wait_for_status(world, once.run_id) == "failed"
        await world.execute("UPDATE yuxi.agents SET max_run_attempts = 2 WHERE slug = 'chatbot'")
        other = await world.thread()
        twice = await world.submit(other, "/fail the model is down")
        assert await wait_for_status(world, twice.run_id, within=30) == "failed"
    assert await world.fetch(
        "SELECT attempt_count, infra_retries, error_type, error_message FROM yuxi.agent_runs"
        " WHERE run_id = %s",
        once.run_id,
    ) == [(1, 0, "ScriptedModelError", "the model is down")]
    assert await world.fetch(
        "SELECT attempt_count, infra_retries, error_type FROM yuxi.agent_runs WHERE run_id = %s",
        twice.run_id,
    ) == [(2, 0, "ScriptedModelError")]
    assert [
        o
        for (o,) in await world.fetch(
            "SELECT outcome FROM yuxi.agent_run_attempts WHERE run_id = %s ORDER BY attempt_no",
            twice.run_id,
        )
    ] == ["released", "failed"]
    for run_id in (once.run_id, twice.run_id):
        assert run_id is not None
        events = await _events(world, run_id)
        assert [e for e, _ in events][-2:] == ["error", "end"]
        assert [e for e, _ in events].count("error") == 1
        assert events[-2][1] == {"error_type": "ScriptedModelError", "message": "the model is down"}
    counters = dict(await world.fetch("SELECT name, value FROM yuxi.maintenance_counters"))
    assert counters["released_after_agent_error"] == 1 and counters["released_after_error"] == 0
