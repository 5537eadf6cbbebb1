"""Runs executed end to end by a real worker: procrastinate delivery, lease, manifest,
LangGraph with the PostgreSQL checkpointer, events, messages."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg import AsyncConnection
from psycopg.rows import dict_row

from tests.integration.conftest import World
from tests.integration.worker_harness import (
    completed,
    running_worker,
    wait_for_status,
    wait_until,
)
from yuxi.queue.runs import run_request_cancel, run_resume
from yuxi.resources import ListedCatalog, ResourceKind
from yuxi.runtime.manifest import canonical_json, manifest_fingerprint
from yuxi.runtime.state import read_thread_state


async def _reply(world: World, run_id: object) -> str:
    return str(
        await world.value(
            "SELECT m.content FROM yuxi.agent_runs r"
            " JOIN yuxi.messages m ON m.id = r.output_message_id WHERE r.run_id = %s",
            run_id,
        )
    )


async def test_echo_runs_end_to_end(world: World, db_url: str, tmp_path: Path) -> None:
    thread = await world.thread()
    async with running_worker(db_url, tmp_path):
        info = await world.submit(thread, "hello there")
        await completed(world, info.run_id)
    assert await _reply(world, info.run_id) == "echo: hello there"
    events = await world.fetch(
        "SELECT seq, event, payload FROM yuxi.run_events WHERE run_id = %s ORDER BY seq",
        info.run_id,
    )
    names = [event for _, event, _ in events]
    assert names[0] == "metadata" and names[-1] == "end" and names.count("end") == 1
    assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1))
    streamed = "".join(
        chunk["text"]
        for _, event, payload in events
        if event == "messages"
        for chunk in payload["chunks"]
    )
    assert streamed == "echo: hello there"
    assert events[0][2]["model"] == "builtin:scripted"
    manifest, fingerprint = (
        await world.fetch(
            "SELECT manifest, manifest_fingerprint FROM yuxi.agent_runs WHERE run_id = %s",
            info.run_id,
        )
    )[0]
    assert manifest_fingerprint(manifest) == fingerprint
    assert await world.fetch(
        "SELECT role, delivery_status FROM yuxi.messages WHERE thread_id = %s ORDER BY id", thread
    ) == [("user", "complete"), ("assistant", None)]


async def test_fifo_backlog_drains_through_the_worker(
    world: World, db_url: str, tmp_path: Path
) -> None:
    thread = await world.thread()
    infos = [await world.submit(thread, f"message {i}") for i in range(5)]
    async with running_worker(db_url, tmp_path):
        for info in infos:
            request = await world.fetch(
                "SELECT dispatched_run_id FROM yuxi.agent_run_requests WHERE request_id = %s",
                info.request_id,
            )
            deadline = time.monotonic() + 20
            while request[0][0] is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                request = await world.fetch(
                    "SELECT dispatched_run_id FROM yuxi.agent_run_requests WHERE request_id = %s",
                    info.request_id,
                )
            await completed(world, request[0][0])
    replies = await world.fetch(
        "SELECT content FROM yuxi.messages WHERE thread_id = %s AND role = 'assistant' ORDER BY id",
        thread,
    )
    assert [r for (r,) in replies] == [f"echo: message {i}" for i in range(5)]


async def test_cancel_mid_sleep_ends_within_two_seconds(
    world: World, db_url: str, tmp_path: Path
) -> None:
    thread = await world.thread()
    async with running_worker(db_url, tmp_path, lease_renew_seconds=3.0):
        info = await world.submit(thread, "/sleep 30")
        await wait_for_status(world, info.run_id, {"running"})
        await asyncio.sleep(0.5)  # well inside the model's sleep
        started = time.monotonic()
        async with world.pool.connection() as conn:
            assert info.run_id is not None
            assert (
                await run_request_cancel(conn, info.run_id, uid=world.alice) == "cancel_requested"
            )
        assert await wait_for_status(world, info.run_id) == "cancelled"
        assert time.monotonic() - started < 2.0
    assert (
        await world.value(
            "SELECT count(*) FROM yuxi.run_events WHERE run_id = %s AND event = 'end'", info.run_id
        )
        == 1
    )


async def test_fail_directive_fails_the_run_and_pauses_the_backlog(
    world: World, db_url: str, tmp_path: Path
) -> None:
    thread = await world.thread()
    async with running_worker(db_url, tmp_path):
        info = await world.submit(thread, "/fail the model broke")
        await world.submit(thread, "queued behind it")
        assert await wait_for_status(world, info.run_id) == "failed"
    row = await world.fetch(
        "SELECT error_type, error_message FROM yuxi.agent_runs WHERE run_id = %s", info.run_id
    )
    assert row[0][0] == "ScriptedModelError" and "the model broke" in row[0][1]
    assert (
        await world.value("SELECT status FROM yuxi.thread_queues WHERE thread_id = %s", thread)
        == "paused"
    )
    errors = await world.fetch(
        "SELECT payload FROM yuxi.run_events WHERE run_id = %s AND event = 'error'", info.run_id
    )
    assert errors == [({"error_type": "ScriptedModelError", "message": "the model broke"},)]


async def test_tool_directive_calls_the_calculator(
    world: World, db_url: str, tmp_path: Path
) -> None:
    thread = await world.thread()
    async with running_worker(db_url, tmp_path):
        info = await world.submit(thread, '/tool calculator {"expression": "2+3"}')
        await completed(world, info.run_id)
    assert await _reply(world, info.run_id) == "tool calculator returned: 5"
    tools = await world.fetch(
        "SELECT payload->>'type' FROM yuxi.run_events"
        " WHERE run_id = %s AND event = 'tool' ORDER BY seq",
        info.run_id,
    )
    assert [t for (t,) in tools] == ["call", "result"]
    roles = await world.fetch(
        "SELECT role FROM yuxi.messages WHERE run_id = %s ORDER BY id", info.run_id
    )
    assert [r for (r,) in roles] == ["user", "assistant", "tool", "assistant"]


async def test_ask_interrupts_and_resume_answers(world: World, db_url: str, tmp_path: Path) -> None:
    thread = await world.thread()
    async with running_worker(db_url, tmp_path):
        info = await world.submit(thread, "/ask What is your name?")
        assert await wait_for_status(world, info.run_id) == "interrupted"
        interrupt = await world.value(
            "SELECT payload FROM yuxi.run_events WHERE run_id = %s AND event = 'interrupt'",
            info.run_id,
        )
        assert interrupt["interrupts"][0]["value"]["question"] == "What is your name?"
        assert info.run_id is not None
        async with world.pool.connection() as conn:
            resumed = await run_resume(conn, info.run_id, resume="Ada", uid=world.alice)
        await completed(world, resumed.run_id)
    assert await _reply(world, resumed.run_id) == "you answered: Ada"


async def test_approval_mode_ask_approve_and_reject(
    world: World, db_url: str, tmp_path: Path
) -> None:
    thread = await world.thread()
    directive = '/tool calculator {"expression": "6*7"}'
    async with running_worker(db_url, tmp_path):
        for decision, expected in (
            ("approve", "tool calculator returned: 42"),
            ("reject", "failed"),
        ):
            info = await world.submit(thread, directive, tool_approval_mode="ask")
            assert await wait_for_status(world, info.run_id) == "interrupted"
            interrupt = await world.value(
                "SELECT payload FROM yuxi.run_events WHERE run_id = %s AND event = 'interrupt'",
                info.run_id,
            )
            request = interrupt["interrupts"][0]["value"]["action_requests"][0]
            assert (request["name"], request["args"]) == ("calculator", {"expression": "6*7"})
            assert info.run_id is not None
            async with world.pool.connection() as conn:
                resumed = await run_resume(
                    conn, info.run_id, resume={"decision": decision}, uid=world.alice
                )
            await completed(world, resumed.run_id)
            assert expected in await _reply(world, resumed.run_id)
    # the rejected call never ran: no successful calculator result after the reject
    results = await world.fetch(
        "SELECT payload->>'status' FROM yuxi.run_events e"
        " JOIN yuxi.agent_runs r ON r.run_id = e.run_id WHERE r.thread_id = %s"
        " AND e.event = 'tool' AND e.payload->>'type' = 'result' ORDER BY r.created_at, e.seq",
        thread,
    )
    assert [s for (s,) in results] == ["success", "error"]


async def test_manifest_holds_no_prompt_text(world: World, db_url: str, tmp_path: Path) -> None:
    await world.execute(
        "UPDATE yuxi.agents SET config_json = %s WHERE slug = 'chatbot'",
        json.dumps(
            {"context": {"model": "builtin:scripted", "system_prompt": "HIDDEN-PROMPT-TEXT"}}
        ),
    )
    thread = await world.thread()
    async with running_worker(db_url, tmp_path):
        info = await world.submit(thread, "hi")
        await completed(world, info.run_id)
    manifest = await world.value(
        "SELECT manifest FROM yuxi.agent_runs WHERE run_id = %s", info.run_id
    )
    assert "HIDDEN-PROMPT-TEXT" not in canonical_json(manifest)


class SlowCatalog(ListedCatalog):
    """Resources that take a while to list: a cancel arrives during preparation."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()

    async def accessible(self, kind: ResourceKind, uid: UUID) -> list[str]:
        self.entered.set()
        await asyncio.sleep(30)
        return []


async def test_cancel_during_preparation_never_executes(
    world: World, db_url: str, tmp_path: Path
) -> None:
    catalog = SlowCatalog()
    thread = await world.thread()
    async with running_worker(db_url, tmp_path, catalog=catalog):
        info = await world.submit(thread, "never answered")
        await asyncio.wait_for(catalog.entered.wait(), timeout=20)
        assert info.run_id is not None
        async with world.pool.connection() as conn:
            await run_request_cancel(conn, info.run_id, uid=world.alice)
        assert await wait_for_status(world, info.run_id, within=5) == "cancelled"
    row = await world.fetch(
        "SELECT manifest IS NULL, output_message_id IS NULL FROM yuxi.agent_runs WHERE run_id = %s",
        info.run_id,
    )
    assert row == [(True, True)]
    assert (
        await world.value("SELECT count(*) FROM checkpoints WHERE thread_id = %s", str(thread)) == 0
    )
    assert await world.value("SELECT count(*) FROM yuxi.messages WHERE role = 'assistant'") == 0


class GatedCatalog(ListedCatalog):
    """Resources listed only once the test opens the gate: the test changes the world
    while the run is being prepared."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def accessible(self, kind: ResourceKind, uid: UUID) -> list[str]:
        self.entered.set()
        await self.gate.wait()
        return []


@pytest.mark.parametrize(
    ("change", "error_type", "message"),
    [
        (
            "UPDATE yuxi.agents SET share_scope = 'admins' WHERE slug = 'chatbot'",
            "run_identity",
            "agent chatbot is not available to the run's user",
        ),
        (
            "UPDATE yuxi.agents SET backend_id = 'subagent' WHERE slug = 'chatbot'",
            "agent_changed",
            "agent chatbot changed backend from chatbot to subagent",
        ),
    ],
)
async def test_a_change_during_preparation_fails_the_run_before_the_graph(
    world: World, db_url: str, tmp_path: Path, change: str, error_type: str, message: str
) -> None:
    catalog = GatedCatalog()
    thread = await world.thread()
    async with running_worker(db_url, tmp_path, catalog=catalog):
        info = await world.submit(thread, "never answered")
        await asyncio.wait_for(catalog.entered.wait(), timeout=20)
        await world.execute(change)
        catalog.gate.set()
        assert await wait_for_status(world, info.run_id, within=10) == "failed"
    row = await world.fetch(
        "SELECT error_type, error_message, manifest IS NOT NULL FROM yuxi.agent_runs"
        " WHERE run_id = %s",
        info.run_id,
    )
    assert row[0][0] == error_type and message in row[0][1]
    assert row[0][2]  # the manifest was written; the identity check came right after
    assert (
        await world.value("SELECT count(*) FROM checkpoints WHERE thread_id = %s", str(thread)) == 0
    )
    assert await world.value("SELECT count(*) FROM yuxi.messages WHERE role = 'assistant'") == 0


async def test_a_retry_with_a_changed_configuration_fails_explicitly(
    world: World, db_url: str, tmp_path: Path
) -> None:
    thread = await world.thread()
    info = await world.submit(thread, "/sleep 30")
    # attempt 1 commits its manifest; then its worker shuts down and releases the run
    async with running_worker(db_url, tmp_path):
        await wait_for_status(world, info.run_id, {"running"})

        async def manifest_committed() -> bool:
            return bool(
                await world.value(
                    "SELECT manifest_fingerprint IS NOT NULL FROM yuxi.agent_runs"
                    " WHERE run_id = %s",
                    info.run_id,
                )
            )

        await wait_until(manifest_committed)
    first = await world.fetch(
        "SELECT status, manifest, manifest_fingerprint FROM yuxi.agent_runs WHERE run_id = %s",
        info.run_id,
    )
    assert first[0][0] == "pending"
    await world.execute(
        "UPDATE yuxi.agents SET config_json = %s WHERE slug = 'chatbot'",
        json.dumps({"context": {"model": "builtin:scripted", "system_prompt": "changed"}}),
    )
    async with running_worker(db_url, tmp_path):
        assert await wait_for_status(world, info.run_id) == "failed"
    row = await world.fetch(
        "SELECT error_type, manifest, manifest_fingerprint, attempt_count FROM yuxi.agent_runs"
        " WHERE run_id = %s",
        info.run_id,
    )
    assert row == [("manifest_conflict", first[0][1], first[0][2], 2)]


async def test_a_retry_after_the_models_flags_changed_fails_explicitly(
    world: World, db_url: str, tmp_path: Path
) -> None:
    await world.execute(
        "SELECT yuxi.model_create(gen_random_uuid(), NULL,"
        ' \'{"spec": "builtin:scripted", "name": "Scripted"}\')'
    )
    thread = await world.thread()
    info = await world.submit(thread, "/sleep 30")
    async with running_worker(db_url, tmp_path):
        await wait_for_status(world, info.run_id, {"running"})

        async def manifest_committed() -> bool:
            return bool(
                await world.value(
                    "SELECT manifest_fingerprint IS NOT NULL FROM yuxi.agent_runs"
                    " WHERE run_id = %s",
                    info.run_id,
                )
            )

        await wait_until(manifest_committed)
    snapshot = await world.value(
        "SELECT manifest -> 'model_snapshot' FROM yuxi.agent_runs WHERE run_id = %s", info.run_id
    )
    assert snapshot["capabilities"]["vision"] is False
    # the registry row changes between the attempts: the retry derives another manifest
    await world.execute("UPDATE yuxi.models SET vision = true WHERE spec = 'builtin:scripted'")
    async with running_worker(db_url, tmp_path):
        assert await wait_for_status(world, info.run_id) == "failed"
    assert await world.fetch(
        "SELECT error_type, attempt_count FROM yuxi.agent_runs WHERE run_id = %s", info.run_id
    ) == [("manifest_conflict", 2)]


async def test_state_shows_the_pending_question_only_while_interrupted(
    world: World, db_url: str, tmp_path: Path
) -> None:
    thread = await world.thread()
    async with running_worker(db_url, tmp_path):
        info = await world.submit(thread, "/ask Favourite colour?")
        assert await wait_for_status(world, info.run_id) == "interrupted"
        async with saver(db_url) as checkpointer:
            state = await read_thread_state(
                checkpointer, str(thread), latest_run_status="interrupted"
            )
            assert state.interrupt is not None
            assert state.interrupt.value == {"type": "question", "question": "Favourite colour?"}
            assert state.agent_state["message_count"] == 2
            assert state.agent_state["todos"] == []
            # the same checkpoint, once the thread moved on, shows no question
            stale = await read_thread_state(
                checkpointer, str(thread), latest_run_status="completed"
            )
            assert stale.interrupt is None
        assert info.run_id is not None
        async with world.pool.connection() as conn:
            resumed = await run_resume(conn, info.run_id, resume="green", uid=world.alice)
        await completed(world, resumed.run_id)
        async with saver(db_url) as checkpointer:
            state = await read_thread_state(
                checkpointer, str(thread), latest_run_status="completed"
            )
            unknown = await read_thread_state(checkpointer, str(uuid4()), latest_run_status=None)
    assert state.interrupt is None and state.agent_state["message_count"] == 4
    assert unknown.agent_state["message_count"] == 0 and unknown.interrupt is None


@contextlib.asynccontextmanager
async def saver(url: str) -> AsyncIterator[AsyncPostgresSaver]:
    async with await AsyncConnection.connect(
        url, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        yield AsyncPostgresSaver(conn)  # type: ignore[arg-type]


async def test_a_retried_run_continues_from_its_checkpoint(
    world: World, db_url: str, tmp_path: Path
) -> None:
    await world.execute("UPDATE yuxi.agents SET max_run_attempts = 3 WHERE slug = 'chatbot'")
    thread = await world.thread()
    info = await world.submit(thread, "/sleep 2")
    async with running_worker(db_url, tmp_path):  # attempt 1 stops mid-sleep: released
        await wait_for_status(world, info.run_id, {"running"})
        await asyncio.sleep(0.3)
    assert await world.value(
        "SELECT status FROM yuxi.agent_runs WHERE run_id = %s", info.run_id
    ) == ("pending")
    async with running_worker(db_url, tmp_path):
        await completed(world, info.run_id)
    assert (
        await world.value(
            "SELECT attempt_count FROM yuxi.agent_runs WHERE run_id = %s", info.run_id
        )
        == 2
    )
    async with saver(db_url) as checkpointer:
        saved = await checkpointer.aget_tuple({"configurable": {"thread_id": str(thread)}})
    assert saved is not None
    humans = [m for m in saved.checkpoint["channel_values"]["messages"] if m.type == "human"]
    assert [m.content for m in humans] == ["/sleep 2"]  # the input is there once
    assert await world.fetch(
        "SELECT content FROM yuxi.messages WHERE thread_id = %s AND role = 'assistant'", thread
    ) == [("slept 2",)]
