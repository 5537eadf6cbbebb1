"""HTTP runs: what a client sees of a run, against the same graph invoked bare.

The workload (the same for every side): --runs runs over --threads conversations,
--in-flight at once, never two at once on one conversation (a run takes a conversation
that is free, and gives it back once its run ended), so each conversation gets about
runs / threads runs in a row and its checkpoints grow as they do in use.

- **yuxi** (``uv run yuxi up``: API and worker in one process, default settings, on the
  benchmark's database, started for each of its rounds so that no other worker takes
  its runs; startup and a warm-up of --warmup runs not counted): a run is
  ``POST /api/agent/runs`` (202, its run id), the run's SSE stream
  (``GET /api/agent/runs/{id}/events``) read until its ``end`` event, and ``GET
  /api/agent/runs/{id}/result`` (checked: ``completed`` with the expected reply), each
  through one httpx client of this process.
- **floor**: the same graph, built the same way (the agent's backend ``get_graph`` with
  the Context the worker resolves for that agent, ``AsyncPostgresSaver`` on a pool like
  the worker's checkpointer pool, on the same database), compiled once per round, and
  ``graph.ainvoke`` in this process, checked the same way.
- with --split: **yuxi api + worker**, ``uv run yuxi api`` and ``uv run yuxi worker`` as
  two processes, so the CPU per run splits into the API's and the worker's.
- with --compare-checkout PATH: **yuxi @<commit>**, the yuxi of another checkout (its
  code and virtualenv: ``git worktree add --detach PATH <commit> && (cd PATH && uv
  sync)``) on a database of its own on the same server, migrated by that checkout, in
  the same rounds: a before and after measured side by side. With --split, its split too.
- with --also-env K=V[,K=V]: **yuxi K=V**, a ``yuxi up`` with those settings.

Sides alternate ABBA over --rounds rounds. CPU per run comes from /proc: each yuxi
process, the PostgreSQL server's processes (when local), and this process (the client;
for the floor, the floor itself). The ratio compares yuxi's server side (yuxi + the
database) with the floor's (this process + the database). Then --sequential runs go one
at a time through each side: submit → ``end`` seen (yuxi), one ``ainvoke`` (floor).

--profile N then runs N runs one at a time (--profile-in-flight K: K at once) through a
second ``yuxi up`` whose cProfile is switched on after the warm-up, with
pg_stat_statements reset before (the embedded server is started with it preloaded; an
external one must preload it itself, else the SQL part is left out): every statement the
run's life sends, with calls and server time per run, grouped by stage, the statements
inside SQL functions, the functions' own time, and the Python time per stage in the yuxi
process (--profile-stats PATH keeps cProfile's stats).

--agent module:Class measures a custom backend the same way (registered in the server
process with ``register_backend``, as its ``yuxi.agents`` entry point would; an agent row
``bench_custom`` is created for it), e.g. ``--agent tests.bench.echo_agent:EchoAgent``.

Targets: yuxi runs/s ÷ floor ≥ 0.5; CPU per run ÷ floor's ≤ 2.5; sequential p50 submit →
``end`` ≤ 20 ms.

    uv run python -m tests.bench.http_runs [--runs 200 --threads 50 --in-flight 20 --rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import math
import os
import pstats
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import httpx
import psycopg
import psycopg.conninfo
import psycopg.sql
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from tests.bench.api_process import ApiProcess, api_process, seed_api_owner, worker_process
from tests.bench.harness import (
    BenchDatabase,
    bench_database,
    create_threads,
    load_average,
    log,
    percentile,
    print_header,
    print_table,
    server_cpu_seconds,
    settle,
    verdict,
)
from tests.bench.run_throughput import resolved_context, saver_pool
from yuxi.agents.base import BaseAgent
from yuxi.agents.chatbot import ChatBotAgent
from yuxi.agents.context import BaseContext

QUERY = "hello"
REPLY = "echo: hello"
CUSTOM_SLUG = "bench_custom"
TARGET_RATE = 0.5
TARGET_CPU = 2.5
TARGET_P50_MS = 20.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.http_runs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=200, help="runs per side and round")
    parser.add_argument("--threads", type=int, default=50, help="conversations they go to")
    parser.add_argument("--in-flight", type=int, default=20, help="runs under way at once")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds (2: A B B A)")
    parser.add_argument("--warmup", type=int, default=20, help="runs per side before measuring")
    parser.add_argument(
        "--sequential", type=int, default=50, help="runs one at a time per side, for latency"
    )
    parser.add_argument("--split", action="store_true", help="also yuxi api + yuxi worker")
    parser.add_argument(
        "--compare-checkout",
        type=Path,
        default=None,
        metavar="PATH",
        help="also the yuxi of another checkout (e.g. an earlier commit, after uv sync"
        " there), on a database of its own migrated by it, in the same rounds",
    )
    parser.add_argument(
        "--also-env",
        action="append",
        default=[],
        metavar="KEY=VALUE[,KEY=VALUE]",
        help="also a `yuxi up` with these environment variables (repeatable), side by side",
    )
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="profile N runs one at a time"
    )
    parser.add_argument(
        "--profile-in-flight",
        type=int,
        default=1,
        metavar="K",
        help="runs under way at once in the profile (1: one at a time)",
    )
    parser.add_argument(
        "--profile-stats",
        type=Path,
        default=None,
        metavar="PATH",
        help="keep the profile's cProfile stats there (for pstats or snakeviz)",
    )
    parser.add_argument(
        "--agent",
        default=None,
        metavar="MODULE:CLASS",
        help="a custom backend to measure instead of the chatbot",
    )
    return parser.parse_args(argv)


# ---------------------------------------------------------------- the agent measured


@dataclass(frozen=True)
class Agent:
    slug: str
    backend: BaseAgent
    preamble: str  # Python run in yuxi's processes before the command

    def context(self, workdir: str) -> BaseContext:
        """The Context the worker resolves for the benchmark's agent."""
        if isinstance(self.backend, ChatBotAgent):
            return resolved_context(workdir)
        return self.backend.context_schema(model="builtin:scripted", workdir=workdir)


def load_agent(spec: str | None) -> Agent:
    if spec is None:
        return Agent("chatbot", ChatBotAgent(), "")
    module_name, _, class_name = spec.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    preamble = (
        "from yuxi.agents.registry import register_backend\n"
        f"from {module_name} import {class_name}\n"
        f"register_backend({class_name})"
    )
    return Agent(CUSTOM_SLUG, cls(), preamble)


def seed(url: str, agent: Agent, threads: int) -> tuple[str, list[UUID]]:
    """The user, its token, the agent and the conversations."""
    uid, token = seed_api_owner(url)
    if agent.slug != "chatbot":
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO yuxi.agents (slug, name, backend_id, config_json)"
                " VALUES (%s, 'Bench custom', %s, %s)",
                (
                    agent.slug,
                    agent.backend.backend_id,
                    '{"context": {"model": "builtin:scripted"}}',
                ),
            )
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT (yuxi.thread_create(%s, %s)).thread_id FROM generate_series(1, %s)",
                (uid, agent.slug, threads),
            ).fetchall()
        return token, [row[0] for row in rows]
    return token, create_threads(url, uid, threads)


# ---------------------------------------------------------------- the workload


RunOnce = Callable[[UUID], Awaitable[None]]


async def workload(threads: list[UUID], runs: int, in_flight: int, run_once: RunOnce) -> None:
    """``runs`` calls of ``run_once``, ``in_flight`` at once, one at a time per thread."""
    free: asyncio.Queue[UUID] = asyncio.Queue()
    for thread in threads:
        free.put_nowait(thread)
    left = runs

    async def slot() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            thread = await free.get()
            try:
                await run_once(thread)
            finally:
                free.put_nowait(thread)

    await asyncio.gather(*(slot() for _ in range(min(in_flight, runs))))


@dataclass
class Round:
    side: str
    runs: int
    seconds: float
    cpu: dict[str, float]  # seconds, by process: yuxi / api / worker / postgres / client

    @property
    def rate(self) -> float:
        return self.runs / self.seconds


@dataclass
class Side:
    name: str
    rounds: list[Round] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)  # seconds, sequential

    def total(self, key: str) -> float:
        return sum(r.cpu.get(key, 0.0) for r in self.rounds)

    @property
    def runs(self) -> int:
        return sum(r.runs for r in self.rounds)

    @property
    def rate(self) -> float:
        return self.runs / sum(r.seconds for r in self.rounds)

    def ms_per_run(self, key: str) -> float:
        return self.total(key) / self.runs * 1000

    @property
    def server_ms(self) -> float:
        """What the server side spends per run: every yuxi process and the database
        (for the floor: the floor's process and the database)."""
        keys = ("yuxi", "api", "worker", "postgres") if self.name != "floor" else ("client",)
        extra = ("postgres",) if self.name == "floor" else ()
        return sum(self.ms_per_run(k) for k in (*keys, *extra))


class YuxiClient:
    """A run as a client makes it: submit, the SSE stream to ``end``, the result."""

    def __init__(self, base_url: str, token: str, in_flight: int) -> None:
        limits = httpx.Limits(
            max_connections=in_flight * 2 + 4, max_keepalive_connections=in_flight * 2 + 4
        )
        self.client = httpx.AsyncClient(
            base_url=base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=60.0,
            limits=limits,
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    async def run(self, thread: UUID) -> float:
        """Returns the seconds from submit to ``end`` seen."""
        start = time.perf_counter()
        response = await self.client.post(
            "/api/agent/runs", json={"thread_id": str(thread), "query": QUERY}
        )
        if response.status_code != 202:
            raise RuntimeError(f"submit: {response.status_code} {response.text}")
        view = response.json()
        if not view["run_id"]:
            raise RuntimeError(f"the run was queued, not dispatched: {view}")
        ended = False
        async with self.client.stream("GET", view["stream_url"]) as stream:
            if stream.status_code != 200:
                raise RuntimeError(f"stream: {stream.status_code}")
            event = None
            async for line in stream.aiter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line == "" and event == "end":
                    ended = True
                    break
                elif line == "":
                    event = None
        seen = time.perf_counter() - start
        if not ended:
            raise RuntimeError(f"run {view['run_id']}: the stream closed before end")
        result = (await self.client.get(f"/api/agent/runs/{view['run_id']}/result")).json()
        if result["status"] != "completed" or result["output"] != REPLY:
            raise RuntimeError(f"run {view['run_id']}: {result}")
        return seen


class Floor:
    """The same graph, ``ainvoke``d in this process."""

    def __init__(self, agent: Agent, url: str, in_flight: int, workdir: str) -> None:
        self.agent = agent
        self.url = url
        self.in_flight = in_flight
        self.context = agent.context(workdir)
        self.graph: Any = None

    @contextlib.asynccontextmanager
    async def compiled(self) -> AsyncIterator[None]:
        async with saver_pool(self.url, self.in_flight) as pool:
            self.graph = await self.agent.backend.get_graph(
                self.context, checkpointer=AsyncPostgresSaver(pool)
            )
            try:
                yield
            finally:
                self.graph = None

    async def run(self, thread: UUID) -> float:
        start = time.perf_counter()
        config: Any = {"configurable": {"thread_id": str(thread)}}
        result = await self.graph.ainvoke(
            {"messages": [{"role": "user", "content": QUERY}]}, config, context=self.context
        )
        seen = time.perf_counter() - start
        reply = result["messages"][-1].content
        if reply != REPLY:
            raise RuntimeError(f"floor replied {reply!r}")
        return seen


def cpu_now(url: str, processes: dict[str, ApiProcess]) -> dict[str, float]:
    now = {name: proc.sample().cpu_seconds for name, proc in processes.items()}
    now["postgres"] = server_cpu_seconds(url)
    now["client"] = time.process_time()
    return now


async def measured_round(
    side: str,
    url: str,
    processes: dict[str, ApiProcess],
    threads: list[UUID],
    args: argparse.Namespace,
    run_once: Callable[[UUID], Awaitable[float]],
) -> Round:
    async def once(thread: UUID) -> None:
        await run_once(thread)

    await workload(threads, args.warmup, args.in_flight, once)
    await asyncio.to_thread(settle, url)
    before = cpu_now(url, processes)
    start = time.perf_counter()
    await workload(threads, args.runs, args.in_flight, once)
    seconds = time.perf_counter() - start
    after = cpu_now(url, processes)
    return Round(side, args.runs, seconds, {k: after[k] - before[k] for k in after})


async def sequential(
    count: int, threads: list[UUID], run_once: Callable[[UUID], Awaitable[float]]
) -> list[float]:
    return [await run_once(threads[i % len(threads)]) for i in range(count)]


# ---------------------------------------------------------------- the profile

# stage of a statement, by the function it calls or the table it writes (first match)
STAGES: list[tuple[str, str]] = [
    (r"yuxi\.request_submit", "submit (request, message, run, delivery job, NOTIFY)"),
    (r"yuxi\.token_authenticate", "auth: token → user"),
    (r"procrastinate_fetch_job", "delivery job fetch"),
    (r"procrastinate_finish_job|procrastinate_retry_job", "delivery job finish"),
    (r"procrastinate_", "procrastinate: periodic jobs, heartbeat"),
    (r"yuxi\.run_claim", "claim"),
    (r"yuxi\.run_execution_input", "execution input"),
    (r"yuxi\.run_commit_manifest", "manifest"),
    (r"yuxi\.run_append_(events|batch)", "event appends"),
    (r"checkpoint", "checkpointer reads and writes"),
    (r"yuxi\.run_finish", "finish (+ next dispatch)"),
    (r"pg_notify|yuxi\.run_events_announce", "NOTIFY after commit (with the events)"),
    (
        r"yuxi\.(run_events_after|run_input|run_get|run_end_event|run_stream_(open|read))\b",
        "SSE: first read, event reads",
    ),
    (r"yuxi\.run_result", "result read"),
    (r"yuxi\.run_renew_lease", "lease renewal"),
    (r"yuxi\.(run_reconcile|run_redeliver|delivery_prune|schedule|tick)", "maintenance"),
    (r"FOR KEY SHARE", "foreign-key checks (inside the functions)"),
    (
        r"^(BEGIN|COMMIT|ROLLBACK|SET|SHOW|LISTEN|UNLISTEN|DISCARD|RESET)|^$|^;$",
        "transaction control, pool checks, LISTEN",
    ),
]


# a call made as a request's bearer token (yuxi/queue/calls.py): the function it calls
AS_CALLER = re.compile(r"token_authenticate\(.*LEFT JOIN LATERAL \(SELECT .*? FROM (yuxi\.\w+)\(")


def statement_name(text: str) -> str:
    """What a statement calls (yuxi.x, procrastinate_x) or writes, else its start."""
    as_caller = AS_CALLER.search(text)
    if as_caller:
        return f"{as_caller.group(1)} (+ token check)"
    called = re.search(r"\b(yuxi\.\w+|procrastinate_\w+|pg_notify)\s*\(", text)
    if called:
        return called.group(1)
    written = re.match(r"\s*(INSERT INTO|UPDATE|DELETE FROM)\s+(\S+)", text, re.IGNORECASE)
    if written:
        return f"{written.group(1)} {written.group(2)}"
    return text[:70]


def stage_of(text: str) -> str:
    stripped = text.strip()
    as_caller = AS_CALLER.search(stripped)
    if as_caller:
        stripped = as_caller.group(1) + "("
    for pattern, stage in STAGES:
        if re.search(pattern, stripped, re.IGNORECASE):
            return stage
    return "other"


@dataclass(frozen=True)
class Statement:
    text: str
    calls: int
    ms: float
    toplevel: bool = True  # sent by a client (else run inside a function)


def statements(url: str) -> list[Statement] | None:
    with psycopg.connect(url, autocommit=True) as conn:
        loaded = conn.execute("SHOW shared_preload_libraries").fetchone()
        if not loaded or "pg_stat_statements" not in str(loaded[0]):
            return None
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        rows = conn.execute(
            "SELECT query, calls, total_exec_time, toplevel FROM pg_stat_statements"
            " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchall()
    return [
        Statement(" ".join(str(q).split()), int(c), float(t), bool(top)) for q, c, t, top in rows
    ]


def reset_statements(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")


def function_times(url: str) -> dict[str, tuple[int, float]]:
    """Calls and self time (ms) of every SQL function so far (needs track_functions)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        rows = conn.execute(
            "SELECT schemaname || '.' || funcname, calls, self_time FROM pg_stat_user_functions"
        ).fetchall()
    return {str(name): (int(calls), float(ms)) for name, calls, ms in rows}


def transactions(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database"
            " WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


# Python stages of the yuxi process: (label, file suffix, function name); cumulative
# time of that function per run, from cProfile.
PY_STAGES: list[tuple[str, str, str]] = [
    ("HTTP: litestar, whole requests (all three)", "litestar/app.py", "__call__"),
    ("  submit handler", "yuxi/api/routes/runs.py", "submit"),
    ("  events handler (first read)", "yuxi/api/routes/runs.py", "events"),
    ("  SSE stream body", "yuxi/api/routes/runs.py", "_stream"),
    ("  result handler", "yuxi/api/routes/runs.py", "result"),
    # the run routes check the token inside their statement (yuxi.queue.calls._call_as)
    ("  the calls made as the request's token", "yuxi/queue/calls.py", "_call_as"),
    ("worker: procrastinate job (fetch → finish)", "procrastinate/worker.py", "run_job"),
    ("  procrastinate fetch_job", "procrastinate/manager.py", "fetch_job"),
    ("  procrastinate finish_job", "procrastinate/manager.py", "finish_job"),
    ("  the run (InFlightRuns.deliver)", "yuxi/worker/inflight.py", "deliver"),
    ("    claim", "yuxi/runtime/executor.py", "_claim"),
    ("    execution input .. graph end", "yuxi/runtime/executor.py", "_run_graph"),
    ("      prepare the Context", "yuxi/runtime/prepare.py", "prepare_agent_runtime_context"),
    ("      manifest commit", "yuxi/queue/runs.py", "run_commit_manifest"),
    ("      get_graph", "yuxi/agents/chatbot.py", "get_graph"),
    ("      graph astream (model, tools, checkpointer)", "langgraph/pregel/main.py", "astream"),
    ("      checkpointer aput", "langgraph/checkpoint/postgres/aio.py", "aput"),
    ("      checkpointer aput_writes", "langgraph/checkpoint/postgres/aio.py", "aput_writes"),
    ("    finish", "yuxi/runtime/executor.py", "_finish"),
    ("event hub: notifications", "yuxi/api/event_hub.py", "_wake"),
]


def python_stages(stats_path: Path, runs: int) -> list[tuple[str, float, float]]:
    stats = pstats.Stats(str(stats_path))
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    out = []
    for label, suffix, name in PY_STAGES:
        calls = 0
        cumulative = 0.0
        for (filename, _line, function), (_cc, nc, _tt, ct, _callers) in table.items():
            if function == name and filename.endswith(suffix):
                calls += nc
                cumulative += ct
        out.append((label, calls / runs, cumulative / runs * 1000))
    return out


def top_functions(stats_path: Path, runs: int, count: int = 15) -> list[tuple[str, float, float]]:
    stats = pstats.Stats(str(stats_path))
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    rows = sorted(table.items(), key=lambda item: item[1][2], reverse=True)[:count]
    out = []
    for (filename, line, function), (_cc, nc, tt, _ct, _callers) in rows:
        short = "/".join(Path(filename).parts[-2:]) if filename.startswith("/") else filename
        out.append((f"{short}:{line} {function}", nc / runs, tt / runs * 1000))
    return out


# In the profiled yuxi process: SIGUSR1 starts cProfile (on the event loop's thread, the
# main one), SIGUSR2 stops it and writes its stats; so the warm-up is left out.
PROFILER = """
import cProfile, signal
_profiler = cProfile.Profile()
def _start_profile(*_):
    _profiler.enable()
def _dump_profile(*_):
    _profiler.disable()
    _profiler.dump_stats({path!r})
signal.signal(signal.SIGUSR1, _start_profile)
signal.signal(signal.SIGUSR2, _dump_profile)
"""


async def profile(
    url: str, agent: Agent, token: str, threads: list[UUID], args: argparse.Namespace
) -> None:
    count = args.profile
    with psycopg.connect(url, autocommit=True) as conn:
        # the profiled process's connections count every function's calls and time
        for setting in ("track_functions = 'all'", "pg_stat_statements.track = 'all'"):
            # pg_stat_statements.track is known once the library is loaded
            with contextlib.suppress(
                psycopg.errors.UndefinedObject, psycopg.errors.InvalidParameterValue
            ):
                conn.execute(
                    psycopg.sql.SQL("ALTER DATABASE {} SET " + setting).format(
                        psycopg.sql.Identifier(conn.info.dbname)
                    )
                )
    with tempfile.TemporaryDirectory(prefix="yuxi-bench-profile-") as scratch:
        stats_path = Path(scratch) / "up.prof"
        preamble = PROFILER.format(path=str(stats_path)) + agent.preamble
        with api_process(url, command="up", preamble=preamble) as up:
            in_flight = args.profile_in_flight
            client = YuxiClient(up.base_url, token, in_flight)

            async def runs(count: int) -> list[float]:
                if in_flight == 1:
                    return await sequential(count, threads, client.run)
                seen: list[float] = []

                async def once(thread: UUID) -> None:
                    seen.append(await client.run(thread))

                await workload(threads, count, in_flight, once)
                return seen

            try:
                await runs(max(10, in_flight))  # warm: first imports, compiled graph
                have_statements = statements(url) is not None
                if have_statements:
                    reset_statements(url)
                functions_before = function_times(url)
                xacts = transactions(url)
                cpu = cpu_now(url, {"yuxi": up})
                os.kill(up.pid, signal.SIGUSR1)
                latencies = await runs(count)
                os.kill(up.pid, signal.SIGUSR2)
                after = cpu_now(url, {"yuxi": up})
                xacts = transactions(url) - xacts
                found = statements(url) if have_statements else None
                functions_after = function_times(url)
                for _ in range(100):
                    if stats_path.exists():
                        break
                    await asyncio.sleep(0.05)
            finally:
                await client.aclose()
        shown = (
            "one at a time" if args.profile_in_flight == 1 else f"{args.profile_in_flight} at once"
        )
        print(f"\nProfile: {count} runs {shown} through `yuxi up` under cProfile")
        print(
            f"  submit → end p50 {percentile(latencies, 0.5) * 1000:.1f} ms (cProfile slows it);"
            f" CPU per run: yuxi {(after['yuxi'] - cpu['yuxi']) / count * 1000:.1f} ms,"
            f" PostgreSQL {(after['postgres'] - cpu['postgres']) / count * 1000:.1f} ms;"
            f" transactions per run {xacts / count:.1f} (all of the database's sessions,"
            " the benchmark's own reads included)"
        )
        if found is None:
            print("  SQL: pg_stat_statements is not preloaded on this server; left out")
        else:
            by_stage: Counter[str] = Counter()
            time_by_stage: Counter[str] = Counter()
            nested = [s for s in found if not s.toplevel]
            found = [s for s in found if s.toplevel]
            for statement in found:
                if "pg_stat_statements" in statement.text or "pg_stat_database" in statement.text:
                    continue
                stage = stage_of(statement.text)
                by_stage[stage] += statement.calls
                time_by_stage[stage] += statement.ms
            rows = [
                (stage, f"{by_stage[stage] / count:.2f}", f"{time_by_stage[stage] / count:.3f}")
                for stage, _ in time_by_stage.most_common()
            ]
            rows.append(
                (
                    "all",
                    f"{sum(by_stage.values()) / count:.2f}",
                    f"{sum(time_by_stage.values()) / count:.3f}",
                )
            )
            print_table(
                "SQL per run by stage (pg_stat_statements, top-level statements; server"
                " execution time)",
                ["stage", "statements", "exec ms"],
                rows,
            )
            top = sorted(found, key=lambda s: s.ms, reverse=True)[:25]
            print_table(
                "SQL statements per run, by server time",
                ["statement", "calls", "exec ms"],
                [
                    (statement_name(s.text), f"{s.calls / count:.2f}", f"{s.ms / count:.3f}")
                    for s in top
                ],
            )
        if found is not None and nested:
            print_table(
                "Statements run inside SQL functions, per run, by server time (the 25 largest)",
                ["statement", "calls", "exec ms"],
                [
                    (n.text[:100], f"{n.calls / count:.2f}", f"{n.ms / count:.3f}")
                    for n in sorted(nested, key=lambda n: n.ms, reverse=True)[:25]
                ],
            )
        spent = {
            name: (
                calls - functions_before.get(name, (0, 0.0))[0],
                ms - functions_before.get(name, (0, 0.0))[1],
            )
            for name, (calls, ms) in functions_after.items()
        }
        spent = {name: v for name, v in spent.items() if v[0] > 0}
        print_table(
            "SQL functions and triggers per run by self time (pg_stat_user_functions;"
            " track_functions = all in this database)",
            ["function", "calls", "self ms"],
            [
                (name, f"{calls / count:.2f}", f"{ms / count:.3f}")
                for name, (calls, ms) in sorted(spent.items(), key=lambda i: -i[1][1])[:20]
            ],
        )
        if stats_path.exists() and args.profile_stats is not None:
            shutil.copyfile(stats_path, args.profile_stats)
        if stats_path.exists():
            print_table(
                "Python per run in the yuxi process, by stage (cProfile cumulative time;"
                " stages nest as indented)",
                ["stage", "calls", "ms"],
                [
                    (label, f"{calls:.2f}", f"{ms:.2f}")
                    for label, calls, ms in python_stages(stats_path, count)
                ],
            )
            print_table(
                "Python functions per run by own time (cProfile tottime)",
                ["function", "calls", "ms"],
                [
                    (name, f"{calls:.1f}", f"{ms:.3f}")
                    for name, calls, ms in top_functions(stats_path, count)
                ],
            )


# ---------------------------------------------------------------- the benchmark


@dataclass(frozen=True)
class Variant:
    """A yuxi side: how it is started and the database it works on."""

    url: str
    token: str
    threads: list[UUID]
    split: bool = False
    env: dict[str, str] = field(default_factory=dict)
    checkout: Path | None = None


@contextlib.contextmanager
def yuxi_processes(variant: Variant, agent: Agent) -> Iterator[tuple[str, dict[str, ApiProcess]]]:
    options: dict[str, Any] = {
        "preamble": agent.preamble,
        "extra_env": variant.env,
        "checkout": variant.checkout,
    }
    if variant.split:
        with (
            api_process(variant.url, command="api", **options) as api,
            worker_process(variant.url, **options) as worker,
        ):
            yield api.base_url, {"api": api, "worker": worker}
    else:
        with api_process(variant.url, command="up", **options) as up:
            yield up.base_url, {"yuxi": up}


def parse_env(spec: str) -> dict[str, str]:
    pairs = [item.partition("=") for item in spec.split(",") if item]
    return {key: value for key, _, value in pairs}


@contextlib.contextmanager
def checkout_database(url: str, checkout: Path) -> Iterator[str]:
    """A database of its own on the same server, migrated by ``checkout``'s yuxi."""
    name = f"{psycopg.conninfo.conninfo_to_dict(url)['dbname']}_cmp"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    other = psycopg.conninfo.make_conninfo(url, dbname=name)
    try:
        uv = shutil.which("uv") or "uv"
        migrate = "import sys; from yuxi.db.migrations import migrate; migrate(sys.argv[1])"
        subprocess.run(
            [uv, "run", "--no-sync", "python", "-c", migrate, other], cwd=checkout, check=True
        )
        yield other
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    psycopg.sql.Identifier(name)
                )
            )


def checkout_label(checkout: Path) -> str:
    found = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    )
    return found.stdout.strip() or checkout.name


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    url = database.url
    agent = load_agent(args.agent)
    token, threads = seed(url, agent, args.threads)
    floor_threads = [uuid4() for _ in threads]  # checkpoint threads of their own
    variants: dict[str, Variant] = {"yuxi": Variant(url, token, threads)}
    for spec in args.also_env:
        variants[f"yuxi {spec}"] = Variant(url, token, threads, env=parse_env(spec))
    if args.split:
        variants["yuxi api + worker"] = Variant(url, token, threads, split=True)
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as workdir:
        if args.compare_checkout is not None:
            other = stack.enter_context(checkout_database(url, args.compare_checkout))
            other_token, other_threads = seed(other, agent, args.threads)
            label = checkout_label(args.compare_checkout)
            variants[f"yuxi @{label}"] = Variant(
                other, other_token, other_threads, checkout=args.compare_checkout
            )
            if args.split:
                variants[f"yuxi @{label} api + worker"] = Variant(
                    other, other_token, other_threads, split=True, checkout=args.compare_checkout
                )
        names = ["floor", *variants]
        sides = {name: Side(name) for name in names}
        floor = Floor(agent, url, args.in_flight, workdir)

        async def round_of(name: str, sequential_runs: bool) -> None:
            """One round of ``name`` (its yuxi processes started for it alone: every
            worker on the database takes runs), then its sequential runs if asked."""
            if name == "floor":
                async with floor.compiled():
                    result = await measured_round(name, url, {}, floor_threads, args, floor.run)
                    if sequential_runs:
                        sides[name].latencies = await sequential(
                            args.sequential, floor_threads, floor.run
                        )
            else:
                variant = variants[name]
                with yuxi_processes(variant, agent) as (base_url, processes):
                    if not sides[name].rounds:
                        for proc in processes.values():
                            log(f"{name}: {proc.command}, pid {proc.pid}")
                    client = YuxiClient(base_url, variant.token, args.in_flight)
                    try:
                        result = await measured_round(
                            name, variant.url, processes, variant.threads, args, client.run
                        )
                        if sequential_runs:
                            sides[name].latencies = await sequential(
                                args.sequential, variant.threads, client.run
                            )
                    finally:
                        await client.aclose()
            sides[name].rounds.append(result)
            log(f"{name}: {result.rate:.1f} runs/s ({result.runs} in {result.seconds:.2f} s)")

        order = []
        for index in range(args.rounds):
            order.extend(names if index % 2 == 0 else list(reversed(names)))
        for position, name in enumerate(order):
            await round_of(name, sequential_runs=position < len(names))

    report(sides, args)
    if args.profile:
        await profile(url, agent, token, threads, args)
    return 0


def report(sides: dict[str, Side], args: argparse.Namespace) -> None:
    floor = sides["floor"]
    rows = []
    for side in sides.values():
        per_round = " / ".join(f"{r.rate:.1f}" for r in side.rounds)
        yuxi_cpu = side.ms_per_run("yuxi") if "yuxi" in side.rounds[0].cpu else math.nan
        rows.append(
            (
                side.name,
                f"{side.rate:.1f}",
                per_round,
                f"{side.rate / floor.rate:.2f}",
                _ms(side.ms_per_run("api") if "api" in side.rounds[0].cpu else math.nan),
                _ms(side.ms_per_run("worker") if "worker" in side.rounds[0].cpu else math.nan),
                _ms(yuxi_cpu),
                _ms(side.ms_per_run("postgres")),
                _ms(side.ms_per_run("client")),
                _ms(side.server_ms),
                f"{side.server_ms / floor.server_ms:.2f}",
                _ms(percentile(side.latencies, 0.5) * 1000),
                _ms(percentile(side.latencies, 0.99) * 1000),
            )
        )
    print_table(
        f"Runs over HTTP: {args.runs} runs per round over {args.threads} conversations,"
        f" {args.in_flight} in flight; CPU ms per run; latency of {args.sequential} runs"
        " one at a time (ms; yuxi: submit → end seen, floor: one ainvoke)",
        [
            "side",
            "runs/s",
            "per round",
            "÷ floor",
            "API",
            "worker",
            "yuxi up",
            "PostgreSQL",
            "client",
            "server side",
            "÷ floor",
            "p50",
            "p99",
        ],
        rows,
    )
    yuxi = sides["yuxi"]
    p50 = percentile(yuxi.latencies, 0.5) * 1000
    ratio = yuxi.rate / floor.rate
    cpu = yuxi.server_ms / floor.server_ms
    print("\nTargets")
    print(f"  runs/s ÷ floor ≥ {TARGET_RATE}: {ratio:.2f} {verdict(ratio >= TARGET_RATE)}")
    print(f"  CPU per run ÷ floor's ≤ {TARGET_CPU}: {cpu:.2f} {verdict(cpu <= TARGET_CPU)}")
    ok = verdict(p50 <= TARGET_P50_MS)
    print(f"  sequential p50 submit → end ≤ {TARGET_P50_MS:g} ms: {p50:.1f} {ok}")


def _ms(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.1f}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    preload = ("pg_stat_statements",) if args.profile else ()
    with bench_database("http_runs", preload=preload) as database:
        print_header("http_runs", database, args)
        status = asyncio.run(measure(database, args))
        print(f"  load    : {load_average()} (1/5/15 min) at the end")
        return status


if __name__ == "__main__":
    raise SystemExit(main())
