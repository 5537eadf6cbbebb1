"""A run's MCP connections against real servers (stdio processes, HTTP in a thread),
without the rest of the run: what a stdio server inherits, names, and closing."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp_servers import EXPECTED_TOKEN, RunningServer, http_server, stdio_command
from yuxi.mcp.session import McpServerSpec, McpSession, McpUnavailable

pytestmark = pytest.mark.asyncio


@pytest.fixture
def silent() -> Iterator[RunningServer]:
    with http_server(slow_start=True) as server:
        yield server


def stdio(slug: str = "local", **env: str) -> McpServerSpec:
    command, args = stdio_command()
    return McpServerSpec(
        id=slug, slug=slug, name=slug, transport="stdio", command=command, args=tuple(args),
        env=env,
    )  # fmt: skip


async def test_a_stdio_server_gets_its_env_and_none_of_the_workers_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("YUXI_SECRET_KEY", "worker-secret")
    monkeypatch.setenv("YUXI_DATABASE_URL", "postgresql://worker@db/yuxi")
    async with McpSession([stdio(SERVER_TOKEN="t")]) as session:
        tools = {tool.name: tool for tool in session.tools}
        assert {"local__echo", "local__has_env", "local__hang"} <= set(tools)

        async def has(name: str) -> str:
            blocks = await tools["local__has_env"].ainvoke({"name": name})
            return str(blocks[0]["text"])

        assert await has("SERVER_TOKEN") == "set"
        assert await has("PATH") == "set"
        assert await has("YUXI_SECRET_KEY") == "unset"
        assert await has("YUXI_DATABASE_URL") == "unset"


def stdio_children() -> set[int]:
    """This process's children that run the test MCP server over stdio."""
    pids: set[int] = set()
    for children in Path("/proc/self/task").glob("*/children"):
        for pid in children.read_text().split():
            with contextlib.suppress(OSError):
                if b"tests.mcp_servers" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    pids.add(int(pid))
    return pids


async def test_closing_ends_a_stdio_server_even_after_a_cancelled_call() -> None:
    before = stdio_children()
    session = McpSession([stdio()])
    await session.__aenter__()
    started_processes = stdio_children() - before
    assert len(started_processes) == 1
    hang = {tool.name: tool for tool in session.tools}["local__hang"]
    call = asyncio.create_task(hang.ainvoke({"seconds": 600}))
    await asyncio.sleep(0.5)
    started = time.monotonic()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await session.close()
    assert time.monotonic() - started < 6
    deadline = time.monotonic() + 5
    while stdio_children() & started_processes:
        assert time.monotonic() < deadline, "the stdio server outlived its connection"
        await asyncio.sleep(0.05)


async def test_a_silent_server_is_unavailable_or_fails_the_session_when_required(
    silent: RunningServer,
) -> None:
    spec = McpServerSpec(
        id="s", slug="silent", name="Silent", transport="streamable_http", url=silent.url,
        connect_timeout_seconds=0.5,
    )  # fmt: skip
    started = time.monotonic()
    async with McpSession([spec, stdio()]) as session:
        names = {tool.name for tool in session.tools}
        assert "silent__unavailable" in names and "local__echo" in names
        assert session.failures == {"silent": "did not answer within 0.5 s"}
    assert time.monotonic() - started < 10
    with pytest.raises(McpUnavailable, match="MCP server silent is required"):
        async with McpSession([spec], required=["silent"]):
            pass


async def test_cancelling_while_connecting_closes_what_was_opened(silent: RunningServer) -> None:
    before = stdio_children()
    slow = McpServerSpec(
        id="s", slug="silent", name="Silent", transport="streamable_http", url=silent.url,
        connect_timeout_seconds=30,
    )  # fmt: skip
    session = McpSession([stdio(), slow])
    entering = asyncio.create_task(session.__aenter__())
    deadline = time.monotonic() + 10
    while not session._open:  # the stdio server is connected; the silent one never is
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    entering.cancel()
    with pytest.raises(asyncio.CancelledError):
        await entering
    assert session._open == []
    deadline = time.monotonic() + 5
    while stdio_children() - before:
        assert time.monotonic() < deadline, "the stdio server outlived a cancelled connect"
        await asyncio.sleep(0.05)


async def test_an_sse_server_gets_its_headers() -> None:
    with http_server("sse") as server:
        spec = McpServerSpec(
            id="e", slug="events", name="Events", transport="sse", url=server.url,
            headers={"Authorization": EXPECTED_TOKEN},
        )  # fmt: skip
        async with McpSession([spec]) as session:
            assert session.failures == {}
            check = {tool.name: tool for tool in session.tools}["events__check_auth"]
            assert (await check.ainvoke({}))[0]["text"] == "authorized"
