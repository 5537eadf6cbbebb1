"""MCP servers: what they add to preparing a run, and to one tool call.

Build: one user; five MCP servers over streamable HTTP on 127.0.0.1 (FastMCP, each in
a thread of its own), one of them slow (it accepts connections and answers nothing:
the run gives up on it after its connect timeout, --slow-timeout seconds).

Measurement, each variant --iterations times in alternating blocks after a warm-up:

- preparation: ``prepare_agent_runtime_context`` (the database catalog) and the
  execution boundary's MCP step (``RunExecutor._connect_mcp``: read the servers again,
  open their secrets, connect, discover and bind the tools) then closing them, for an
  agent with ``mcps: []`` (none), with the four fast servers, and with all five;
- one tool call (``echo``): ``langchain.mcp.MCPAdapter``'s own tool on a held
  connection (direct), against the tool yuxi binds (``<slug>__echo``: the timeout and
  error guard around the same adapter tool), on the same server.

Targets: the slow server costs a run at most its connect timeout (five servers ≤
none + slow-timeout + 0.5 s); yuxi's tool call ≤ 1.1× the direct call.

    uv run python -m tests.bench.mcp
    YUXI_BENCH_DATABASE_URL=postgresql://… uv run python -m tests.bench.mcp
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

from langchain_core._api import suppress_langchain_beta_warning
from psycopg_pool import AsyncConnectionPool

from tests.bench.harness import BenchDatabase, log, percentile, print_table, run_benchmark, verdict
from tests.mcp_servers import http_server
from yuxi.agents.chatbot import ChatBotAgent
from yuxi.mcp.session import McpServerSpec, McpSession
from yuxi.queue.mcp import mcp_server_create
from yuxi.queue.runs import ExecutionInput
from yuxi.resources import DatabaseCatalog
from yuxi.runtime.executor import ExecutorSettings, RunExecutor
from yuxi.runtime.prepare import prepare_agent_runtime_context

with suppress_langchain_beta_warning():
    from langchain.mcp import MCPAdapter

FAST = ("alpha", "beta", "gamma", "delta")


def _run(uid: uuid.UUID, mcps: list[str]) -> ExecutionInput:
    return ExecutionInput(
        run_id=uuid.uuid4(),
        thread_id=uuid.uuid4(),
        uid=uid,
        request_id="bench",
        run_type="chat",
        created_by_run_id=None,
        agent_slug="chatbot",
        backend_id="chatbot",
        agent_config={"context": {"model": "builtin:scripted", "mcps": mcps}},
        agent_updated_at=None,
        project_id=None,
        workdir_path=None,
        input_text="hi",
        input_payload={"model_spec": "builtin:scripted"},
        identity_error=None,
        visible_subagents=[],
    )


async def _prepare(executor: RunExecutor, home: Path, run: ExecutionInput) -> tuple[float, int]:
    """One preparation through the MCP step, then closing; (seconds, tools bound)."""
    started = time.perf_counter()
    prepared = await prepare_agent_runtime_context(
        ChatBotAgent(), run, catalog=executor.catalog, home=home
    )
    async with contextlib.AsyncExitStack() as connections:
        await executor._connect_mcp(SimpleNamespace(uid=run.uid), prepared.context, connections)  # type: ignore[arg-type]
        tools = len(prepared.context._mcp_tools)
    return time.perf_counter() - started, tools


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as servers, tempfile.TemporaryDirectory() as home_dir:
        home = Path(home_dir)
        fast = [servers.enter_context(http_server()) for _ in FAST]
        slow = servers.enter_context(http_server(slow_start=True))
        pool = AsyncConnectionPool(database.url, min_size=2, max_size=4, open=False,
                                   kwargs={"autocommit": True})  # fmt: skip
        await pool.open()
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(
                    "INSERT INTO yuxi.users (name, is_admin) VALUES ('bench', true) RETURNING id"
                )
                row = await cur.fetchone()
                assert row is not None
                uid = row[0]
                for slug, server in zip(FAST, fast, strict=True):
                    await mcp_server_create(conn, uuid.uuid4(), uid, {
                        "slug": slug, "name": slug, "transport": "streamable_http",
                        "url": server.url,
                    })  # fmt: skip
                await mcp_server_create(conn, uuid.uuid4(), uid, {
                    "slug": "slow", "name": "slow", "transport": "streamable_http",
                    "url": slow.url, "connect_timeout_seconds": args.slow_timeout,
                })  # fmt: skip
            executor = RunExecutor(
                pool, None, DatabaseCatalog(pool), None,  # type: ignore[arg-type]
                ExecutorSettings(worker_name="bench", home=home),
            )  # fmt: skip
            variants = {
                "none (mcps: [])": [],
                "4 fast servers": list(FAST),
                "5 servers, 1 slow": [*FAST, "slow"],
            }
            times: dict[str, list[float]] = {name: [] for name in variants}
            bound: dict[str, int] = {}
            for mcps in variants.values():  # warm-up
                await _prepare(executor, home, _run(uid, mcps))
            log(f"preparation: {args.iterations} x {len(variants)} variants")
            for _ in range(args.iterations):
                for name, mcps in variants.items():
                    seconds, bound[name] = await _prepare(executor, home, _run(uid, mcps))
                    times[name].append(seconds)
            calls = await _tool_calls(fast[0].url, args.calls)
        finally:
            await pool.close()

    base = percentile(times["none (mcps: [])"], 0.5)
    print_table(
        "Preparation through the MCP step (connect, discover, bind, close)",
        ("variant", "tools", "p50 ms", "p95 ms", "× none"),
        [
            (name, bound[name], f"{percentile(v, 0.5) * 1e3:.1f}",
             f"{percentile(v, 0.95) * 1e3:.1f}", f"{percentile(v, 0.5) / base:.1f}")
            for name, v in times.items()
        ],
    )  # fmt: skip
    direct, yuxi = calls["direct MCPAdapter tool"], calls["yuxi <slug>__echo"]
    print_table(
        "One tool call (echo) on a held connection",
        ("variant", "p50 ms", "p95 ms", "× direct"),
        [
            (name, f"{percentile(v, 0.5) * 1e3:.2f}", f"{percentile(v, 0.95) * 1e3:.2f}",
             f"{percentile(v, 0.5) / percentile(direct, 0.5):.2f}")
            for name, v in calls.items()
        ],
    )  # fmt: skip
    slow_ok = percentile(times["5 servers, 1 slow"], 0.5) <= base + args.slow_timeout + 0.5
    call_ok = percentile(yuxi, 0.5) <= 1.1 * percentile(direct, 0.5)
    print(f"  slow server bounded by its connect timeout: {verdict(slow_ok)}")
    print(f"  tool call overhead ≤ 1.1×: {verdict(call_ok)}")
    if args.json:
        summary = {name: percentile(v, 0.5) for name, v in {**times, **calls}.items()}
        print(json.dumps(summary))
    return 0 if slow_ok and call_ok else 1


async def _tool_calls(url: str, count: int) -> dict[str, list[float]]:
    spec = McpServerSpec(id="bench", slug="bench", name="bench", transport="streamable_http",
                         url=url)  # fmt: skip
    results: dict[str, list[float]] = {"direct MCPAdapter tool": [], "yuxi <slug>__echo": []}
    async with MCPAdapter(url) as adapter, McpSession([spec]) as session:
        direct = {t.name: t for t in await adapter.list_tools()}["echo"]
        ours = {t.name: t for t in session.tools}["bench__echo"]
        for tool in (direct, ours):  # warm-up
            await tool.ainvoke({"text": "warm"})
        log(f"tool calls: {count} x 2 variants")
        for i in range(count):
            for name, tool in (("direct MCPAdapter tool", direct), ("yuxi <slug>__echo", ours)):
                started = time.perf_counter()
                await tool.ainvoke({"text": f"call {i}"})
                results[name].append(time.perf_counter() - started)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--slow-timeout", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    return run_benchmark("mcp", "MCP servers: preparation and tool calls", parser.parse_args(),
                         measure)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
