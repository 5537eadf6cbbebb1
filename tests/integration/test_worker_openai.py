"""Runs on an OpenAI-compatible provider, through a real worker, against a local HTTP
server: streaming, non-streaming, a provider error, and the key kept out of storage."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import World
from tests.integration.worker_harness import completed, running_worker, wait_for_status
from tests.openai_stub import TEXT, StubServer, stub_server

KEY = "sk-yuxi-worker-test-91d3e0c2aa"


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubServer]:
    with stub_server() as server:
        monkeypatch.setenv("YUXI_OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("YUXI_OPENAI_API_KEY", KEY)
        monkeypatch.setenv("YUXI_OPENAI_MAX_RETRIES", "0")
        capabilities = {
            "openai:gpt-stub": {"tool_calling": False},
            "openai:plain": {"streaming": False, "tool_calling": False},
        }
        monkeypatch.setenv("YUXI_MODEL_CAPABILITIES", json.dumps(capabilities))
        yield server


async def _agent(world: World, model: str, tools: list[str] | None = None) -> None:
    config = {"context": {"model": model, "tools": tools or []}}
    await world.execute(
        "INSERT INTO yuxi.agents (slug, name, backend_id, config_json)"
        " VALUES (%s, %s, 'chatbot', %s)",
        model.replace(":", "-"),
        model,
        json.dumps(config),
    )


async def _everything_stored(world: World) -> list[Any]:
    """Every value of every row of yuxi's and the checkpointer's tables."""
    tables = await world.fetch(
        "SELECT schemaname || '.' || tablename FROM pg_tables"
        " WHERE schemaname = 'yuxi' OR tablename LIKE 'checkpoint%%'"
        " OR tablename LIKE 'procrastinate%%'"
    )
    values: list[Any] = []
    for (table,) in tables:
        for row in await world.fetch(f"SELECT * FROM {table}"):
            values.extend(row)
    return values


def _contains(values: list[Any], needle: str) -> bool:
    for value in values:
        if isinstance(value, (bytes, memoryview)):
            if needle.encode() in bytes(value):
                return True
        elif needle in json.dumps(value, default=str):
            return True
    return False


@pytest.mark.parametrize(
    ("model", "streamed"), [("openai:gpt-stub", True), ("openai:plain", False)]
)
async def test_openai_compatible_run_completes(
    world: World,
    db_url: str,
    tmp_path: Path,
    provider: StubServer,
    model: str,
    streamed: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    await _agent(world, model)
    thread = await world.thread(agent=model.replace(":", "-"))
    async with running_worker(db_url, tmp_path):
        info = await world.submit(thread, "hi")
        await completed(world, info.run_id)
    reply = await world.value(
        "SELECT m.content FROM yuxi.agent_runs r JOIN yuxi.messages m ON m.id = r.output_message_id"
        " WHERE r.run_id = %s",
        info.run_id,
    )
    assert reply == TEXT
    chunks = await world.value(
        "SELECT count(*) FROM yuxi.run_events WHERE run_id = %s AND event = 'messages'", info.run_id
    )
    assert chunks >= 1
    bodies = [r.body for r in provider.requests if r.path.endswith("/chat/completions")]
    assert bodies and all(bool(b.get("stream")) is streamed for b in bodies)
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in provider.requests)
    assert not _contains(await _everything_stored(world), KEY)
    assert KEY not in caplog.text


async def test_a_tool_call_round_trip(
    world: World, db_url: str, tmp_path: Path, provider: StubServer
) -> None:
    await _agent(world, "openai:tooled", tools=["get_current_time"])
    thread = await world.thread(agent="openai-tooled")
    async with running_worker(db_url, tmp_path):
        info = await world.submit(thread, "what time is it?")
        await completed(world, info.run_id)
    rows = await world.fetch(
        "SELECT role, content, metadata FROM yuxi.messages WHERE run_id = %s ORDER BY id",
        info.run_id,
    )
    assert [role for role, _, _ in rows] == ["user", "assistant", "tool", "assistant"]
    assert rows[1][2]["tool_calls"][0]["name"] == "get_current_time"
    assert rows[2][2]["name"] == "get_current_time" and rows[2][2]["status"] == "success"
    assert rows[3][1] == f"tool said {rows[2][1]}"
    offered = provider.requests[0].body["tools"]
    # its tools, the task tool (the world's `helper` subagent is visible), ask_user, then
    # what middleware adds: write_todos (the todo list)
    assert [t["function"]["name"] for t in offered] == [
        "get_current_time",
        "task",
        "ask_user",
        "write_todos",
    ]


async def test_a_provider_error_fails_the_run_clearly(
    world: World,
    db_url: str,
    tmp_path: Path,
    provider: StubServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    await _agent(world, "openai:boom")
    thread = await world.thread(agent="openai-boom")
    async with running_worker(db_url, tmp_path):
        info = await world.submit(thread, "hi")
        assert await wait_for_status(world, info.run_id) == "failed"
    error_type, message = (
        await world.fetch(
            "SELECT error_type, error_message FROM yuxi.agent_runs WHERE run_id = %s", info.run_id
        )
    )[0]
    assert "upstream exploded" in message
    assert "500" in message or "InternalServerError" in error_type
    assert not _contains(await _everything_stored(world), KEY)
    assert KEY not in caplog.text
