"""Run throughput: echo runs completed per second end to end, against a bare LangGraph invoke.

- yuxi: a submitter (a thread of its own, with its own event loop and connection) keeps
  --backlog runs outstanding, each submitted with ``request_submit`` on a conversation of
  its own, so all can run at once. A real worker (``yuxi.worker.app.run_worker``, in this
  process's event loop, ``worker_concurrency`` = --concurrency, maintenance every
  --maintenance-seconds, default lease) hears of each delivery job through procrastinate,
  and its executor claims the run, prepares the Context, writes the manifest, runs the
  chatbot graph over ``builtin:scripted`` (reply ``echo: hello``) with the
  AsyncPostgresSaver checkpointer, appends events and finishes the run. A round starts the
  worker (home in a temporary directory), lets it warm up for --warmup seconds, counts the
  runs that became ``completed`` in agent_runs over a window of --seconds, then stops
  submitting, drains what is outstanding and stops the worker.
- bare: the same graph, built the same way (``ChatBotAgent().get_graph(context,
  checkpointer=AsyncPostgresSaver(pool))`` with the Context the worker resolves: model
  ``builtin:scripted``, every built-in tool, a temporary workdir) on a pool configured like
  the worker's checkpointer pool, on the same database; --concurrency asyncio tasks each
  calling ``graph.ainvoke`` with a new thread_id, counted over the same window after the
  same warm-up.

Variants are measured side by side in one run on one database, alternating for --rounds
(ABBA). "client cpu ms/run" is this process's CPU per run, without the yuxi submitter
thread (shown on its own: in production submits come from the API process);
"server cpu ms/run" that of the PostgreSQL processes (when local). Latency: for yuxi,
submit → completed from agent_runs' own timestamps (created_at → finished_at; with a
backlog kept, mostly time spent queued: about backlog / rate) and claimed → finished (the
run's execution); for bare, one ``ainvoke``.

First (--profile-runs), runs go one at a time through each side (the worker then with
worker_concurrency 1), to show where a run's time goes: the executor's steps,
procrastinate's fetch and finish and the graph are timed (wall, and CPU of the event
loop's thread, each step exclusive of the steps nested in it), every SQL statement the
event loop's thread sends is counted by what it calls and the step that sent it, and,
where the server allows it, the server's time in each SQL function is read from
pg_stat_user_functions (track_functions = all for the pass only). The bare side runs the
graph three ways, interleaved: ainvoke; astream as the executor calls it (stream modes
messages + updates, its recursion limit, a loop over the parts); the same on a graph
compiled just before (compiling not timed). The statement census of the concurrent
windows is printed too.

With --diagnose-graph, two more variants: ``bare, graph built per run`` (get_graph before
each ainvoke, as the worker does) and ``yuxi, graphs cached`` (the worker with get_graph
patched, in this process only, to reuse a compiled graph for the same graph-relevant
Context fields). Neither is a supported configuration; they measure one cause.

With --budget, a third variant: ``yuxi, budget on``, the same runs with ``builtin:scripted``
registered as a priced platform model and the runs' user given a credit balance, so each
run's claim freezes credits and its end settles and charges them (usage is recorded in
every variant: it has no off switch). Target: ≥ 0.95 × yuxi without it.

Target: yuxi ≥ 0.6 × the bare rate.

    uv run python -m tests.bench.run_throughput [--seconds 10] [--concurrency 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import re
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock
from uuid import UUID, uuid4

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.pregel import Pregel
from procrastinate.manager import JobManager
from psycopg import AsyncConnection, AsyncCursor, pq, sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

import yuxi.runtime.events as events_module
import yuxi.runtime.executor as executor_module
from tests.bench.harness import (
    BenchDatabase,
    Measured,
    connect,
    create_threads,
    log,
    percentile,
    print_table,
    run_benchmark,
    seed_owner,
    server_cpu_seconds,
    settle,
    verdict,
)
from yuxi.agents.chatbot import ChatBotAgent, ChatBotContext
from yuxi.agents.context import BaseContext
from yuxi.agents.graph import build_system_prompt
from yuxi.agents.tools import builtin_tool_names
from yuxi.queue.events import EVENTS_CHANNEL
from yuxi.queue.requests import request_submit
from yuxi.runtime.executor import RunExecutor
from yuxi.settings import Settings
from yuxi.worker.app import run_worker

TARGET_RATIO = 0.6
QUERY = "hello"
REPLY = "echo: hello"
THREAD_CHUNK = 1_000  # conversations the submitter creates when the pre-created ones run out
BENCH_TAG = "/* bench */ "  # the benchmark's own queries: left out of the statement census
COMPLETED = BENCH_TAG + (
    "SELECT count(*), clock_timestamp() FROM yuxi.agent_runs WHERE status = 'completed'"
)
FINISHED_AMONG = BENCH_TAG + (
    "SELECT run_id, status FROM yuxi.agent_runs WHERE run_id = ANY(%s) AND finished_at IS NOT NULL"
)
WINDOW_LATENCIES = BENCH_TAG + (
    "SELECT extract(epoch FROM finished_at - created_at)::float8,"
    " extract(epoch FROM finished_at - started_at)::float8,"
    " extract(epoch FROM started_at - created_at)::float8"
    " FROM yuxi.agent_runs WHERE status = 'completed' AND finished_at > %s AND finished_at <= %s"
)
MORE_THREADS = BENCH_TAG + (
    "SELECT (yuxi.thread_create(%s, 'chatbot')).thread_id FROM generate_series(1, %s)"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.run_throughput",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="window per variant and round")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=4,
        help="worker_concurrency of the yuxi worker, and concurrent ainvoke tasks of bare",
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of all variants")
    parser.add_argument(
        "--warmup", type=float, default=2.0, help="seconds run before each window, not counted"
    )
    parser.add_argument(
        "--backlog",
        type=int,
        default=0,
        help="yuxi runs kept submitted and not yet finished (0: 4 x --concurrency)",
    )
    parser.add_argument(
        "--maintenance-seconds", type=int, default=1, help="the worker's maintenance interval"
    )
    parser.add_argument(
        "--thread-pool", type=int, default=8_000, help="conversations pre-created for yuxi"
    )
    parser.add_argument(
        "--profile-runs",
        type=int,
        default=200,
        help="runs done one at a time through each side first, step by step (0: skip)",
    )
    parser.add_argument(
        "--budget",
        action="store_true",
        help="add 'yuxi, budget on': builtin:scripted registered as a priced platform model and"
        " the runs' user given a credit balance, so every run freezes, is settled and charged",
    )
    parser.add_argument(
        "--diagnose-graph",
        action="store_true",
        help="add 'bare, graph built per run' and 'yuxi, graphs cached' variants",
    )
    args = parser.parse_args(argv)
    if args.backlog <= 0:
        args.backlog = 4 * args.concurrency
    return args


# --------------------------------------------------------------------------- instruments


@dataclass
class _Frame:
    name: str
    child_wall: float = 0.0
    child_cpu: float = 0.0


_PHASE: ContextVar[_Frame | None] = ContextVar("bench_phase", default=None)
TRANSACTION = object()  # what Census.count is given for a BEGIN … COMMIT pair
_LABEL = re.compile(
    r"\b(yuxi\.\w+|procrastinate_\w+|pg_notify|checkpoint_blobs|checkpoint_writes|checkpoints)\b"
)


class Census:
    """Counts the SQL statements this process's main thread sends while active, by what
    they call (yuxi function, procrastinate function, checkpointer table, pg_notify) and by
    the phase (see Phases) they were sent from. ``executemany`` counts one per row."""

    def __init__(self) -> None:
        self.active = False
        self.counts: Counter[tuple[str, str]] = Counter()
        self._main = threading.get_ident()
        self._composed: dict[int, tuple[object, str]] = {}
        self._texts: dict[str | bytes, str] = {}

    @contextlib.contextmanager
    def installed(self) -> Iterator[Census]:
        census = self
        execute = AsyncCursor.execute
        executemany = AsyncCursor.executemany
        commit = AsyncConnection.commit

        async def counted_execute(cur: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            census.count(query, 1)
            return await execute(cur, query, *args, **kwargs)

        async def counted_executemany(cur: Any, query: Any, params: Any, **kwargs: Any) -> Any:
            params = list(params)
            census.count(query, len(params))
            return await executemany(cur, query, params, **kwargs)

        async def counted_commit(conn: Any) -> None:
            # a connection not in autocommit sent BEGIN before its first statement
            if conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
                census.count(TRANSACTION, 2)
            await commit(conn)

        with (
            mock.patch.object(AsyncCursor, "execute", counted_execute),
            mock.patch.object(AsyncCursor, "executemany", counted_executemany),
            mock.patch.object(AsyncConnection, "commit", counted_commit),
        ):
            yield self

    def count(self, query: Any, statements: int) -> None:
        if not self.active or threading.get_ident() != self._main:
            return
        label = self.label(query)
        if label == "bench":
            return
        frame = _PHASE.get()
        self.counts[(frame.name if frame else "", label)] += statements

    def label(self, query: Any) -> str:
        if query is TRANSACTION:
            return "BEGIN + COMMIT (a connection not in autocommit)"
        if isinstance(query, str | bytes):
            known = self._texts.get(query)
            if known is None:
                text = query if isinstance(query, str) else query.decode()
                known = self._texts[query] = _label_of(text)
            return known
        cached = self._composed.get(id(query))
        if cached is not None and cached[0] is query:
            return cached[1]
        text = query.as_string() if isinstance(query, sql.Composable) else str(query)
        label = _label_of(text)
        self._composed[id(query)] = (query, label)
        return label

    def snapshot(self) -> Counter[tuple[str, str]]:
        return Counter(self.counts)

    @staticmethod
    def by_label(counts: Counter[tuple[str, str]]) -> Counter[str]:
        labels: Counter[str] = Counter()
        for (_phase, label), count in counts.items():
            labels[label] += count
        return labels


def _label_of(text: str) -> str:
    if text.startswith(BENCH_TAG):
        return "bench"
    if not text:
        return "pool connection check (empty query)"
    match = _LABEL.search(text)
    if match is None:
        return "other: " + " ".join(text.split())[:60]
    name = match.group(1)
    if name.startswith("checkpoint"):
        verb = text.split(None, 1)[0].upper()
        return f"checkpointer: {verb} {name}"
    return name


class Phases:
    """Wall and CPU time (of the calling thread) spent in named steps, exclusive of the
    steps nested in them. Meaningful only while one run is in flight at a time."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = collections.defaultdict(float)
        self.cpu: dict[str, float] = collections.defaultdict(float)
        self.calls: Counter[str] = Counter()

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        parent = _PHASE.get()
        frame = _Frame(name)
        token = _PHASE.set(frame)
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
            try:
                _PHASE.reset(token)
            except ValueError:  # an async generator closed from another context
                _PHASE.set(parent)
            self.wall[name] += wall - frame.child_wall
            self.cpu[name] += cpu - frame.child_cpu
            self.calls[name] += 1
            if parent is not None:
                parent.child_wall += wall
                parent.child_cpu += cpu

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        phases = self

        @functools.wraps(fn)
        async def timed_call(*args: Any, **kwargs: Any) -> Any:
            with phases.timed(name):
                return await fn(*args, **kwargs)

        return timed_call

    def wrap_sync(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        phases = self

        @functools.wraps(fn)
        def timed_call(*args: Any, **kwargs: Any) -> Any:
            with phases.timed(name):
                return fn(*args, **kwargs)

        return timed_call

    def wrap_stream(self, name: str, fn: Callable[..., AsyncIterator[Any]]) -> Callable[..., Any]:
        phases = self

        @functools.wraps(fn)
        async def timed_stream(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            with phases.timed(name):
                async for item in fn(*args, **kwargs):
                    yield item

        return timed_stream

    @contextlib.contextmanager
    def on_worker(self) -> Iterator[None]:
        """Times the worker's steps (patched in this process for the block)."""
        async_targets: list[tuple[object, str, str]] = [
            (JobManager, "fetch_job", "procrastinate fetch_job"),
            (JobManager, "finish_job", "procrastinate finish_job (delete)"),
            (RunExecutor, "execute", "executor: own work (tasks, mkdir, ...)"),
            (executor_module, "run_claim_execution", "run_claim_execution (+ execution input)"),
            (executor_module, "prepare_agent_runtime_context", "prepare context"),
            (executor_module, "run_commit_manifest", "run_commit_manifest (+ identity re-check)"),
            (ChatBotAgent, "get_graph", "get_graph (compiles the graph)"),
            (events_module, "run_append_batch", "run_append_batch (+ notify)"),
            (executor_module, "run_finish", "run_finish (+ notify)"),
        ]
        sync_targets: list[tuple[object, str, str]] = [
            (executor_module, "build_manifest", "manifest build + digest"),
            (executor_module, "manifest_fingerprint", "manifest build + digest"),
        ]
        with contextlib.ExitStack() as stack:
            for owner, attr, name in async_targets:
                wrapped = self.wrap(name, getattr(owner, attr))
                stack.enter_context(mock.patch.object(owner, attr, wrapped))
            for owner, attr, name in sync_targets:
                wrapped = self.wrap_sync(name, getattr(owner, attr))
                stack.enter_context(mock.patch.object(owner, attr, wrapped))
            stream = self.wrap_stream("graph astream + the loop over its parts", Pregel.astream)
            stack.enter_context(mock.patch.object(Pregel, "astream", stream))
            yield


# --------------------------------------------------------------------------- both sides


@dataclass
class RoundResult:
    measured: Measured
    latencies: list[float]  # yuxi: submit → completed; bare: one ainvoke (seconds)
    executing: list[float]  # yuxi: claimed → finished; bare: one ainvoke
    queued: list[float] = field(default_factory=list)  # yuxi: submit → claimed
    submitter_cpu: float = 0.0
    statements: Counter[str] = field(default_factory=Counter)


def resolved_context(workdir: str) -> ChatBotContext:
    """The Context the worker resolves for the seeded chatbot agent (its configuration is
    just the model): every built-in tool, no knowledge base, MCP server, skill or
    subagent (none exist in the benchmark database)."""
    return ChatBotContext(
        model="builtin:scripted",
        tools=builtin_tool_names(),
        knowledges=[],
        mcps=[],
        skills=[],
        subagents=[],
        workdir=workdir,
    )


@contextlib.asynccontextmanager
async def saver_pool(url: str, concurrency: int) -> AsyncIterator[AsyncConnectionPool[Any]]:
    """A pool configured like the worker's checkpointer pool (yuxi.worker.app)."""
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=max(concurrency, 2),
        open=False,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    )
    await pool.open()
    try:
        yield pool
    finally:
        await pool.close()


def check_reply(result: Any) -> None:
    reply = result["messages"][-1].content
    if reply != REPLY:
        raise RuntimeError(f"bare graph replied {reply!r}, expected {REPLY!r}")


def _graph_key(context: BaseContext) -> tuple[Any, ...]:
    """What build_agent_graph reads from the Context (see yuxi.agents.graph)."""
    return (
        type(context),
        context.model,
        tuple(context.tools or ()),
        context.tool_approval_mode,
        context.summary_threshold,
        context.summary_keep_messages,
        context.summary_prompt,
        build_system_prompt(context),
    )


@contextlib.contextmanager
def graphs_cached() -> Iterator[None]:
    """Diagnostic: ChatBotAgent.get_graph reuses a compiled graph for the same
    graph-relevant Context fields and checkpointer (patched in this process only)."""
    build = ChatBotAgent.get_graph
    cache: dict[tuple[Any, ...], CompiledStateGraph[Any, Any, Any, Any]] = {}

    async def cached(
        self: ChatBotAgent, context: BaseContext, *, checkpointer: Any = None
    ) -> CompiledStateGraph[Any, Any, Any, Any]:
        key = (*_graph_key(context), id(checkpointer))
        graph = cache.get(key)
        if graph is None:
            graph = cache[key] = await build(self, context, checkpointer=checkpointer)
        return graph

    with mock.patch.object(ChatBotAgent, "get_graph", cached):
        yield


# --------------------------------------------------------------------------- bare


async def bare_round(
    url: str, label: str, args: argparse.Namespace, census: Census, *, build_per_run: bool
) -> RoundResult:
    """--concurrency tasks invoking the graph back to back; what ends inside the window
    counts."""
    agent = ChatBotAgent()
    ended: list[tuple[float, float]] = []
    window: dict[str, CpuSnapshot] = {}
    with tempfile.TemporaryDirectory(prefix="yuxi-bench-bare-") as workdir:
        context = resolved_context(workdir)
        async with saver_pool(url, args.concurrency) as pool:
            saver = AsyncPostgresSaver(pool)
            graph = await agent.get_graph(context, checkpointer=saver)
            start = time.perf_counter()
            opens, closes = start + args.warmup, start + args.warmup + args.seconds

            async def invoker() -> None:
                while time.perf_counter() < closes:
                    began = time.perf_counter()
                    used = graph
                    if build_per_run:
                        used = await agent.get_graph(context, checkpointer=saver)
                    result = await used.ainvoke(
                        {"messages": [{"role": "user", "content": QUERY}]},
                        {"configurable": {"thread_id": str(uuid4())}},
                        context=context,
                    )
                    check_reply(result)
                    now = time.perf_counter()
                    ended.append((now, now - began))

            async def clock() -> None:
                await asyncio.sleep(opens - time.perf_counter())
                window["start"] = snapshot_cpu(url, census)
                await asyncio.sleep(closes - time.perf_counter())
                window["end"] = snapshot_cpu(url, census)

            await asyncio.gather(clock(), *(invoker() for _ in range(args.concurrency)))
    first, last = window["start"], window["end"]
    inside = [spent for at, spent in ended if first.at <= at <= last.at]
    measured = Measured(
        label,
        len(inside),
        last.at - first.at,
        last.process_cpu - first.process_cpu,
        last.server_cpu - first.server_cpu,
    )
    statements = Census.by_label(last.census - first.census)
    return RoundResult(measured, inside, inside, statements=statements)


@dataclass(frozen=True)
class CpuSnapshot:
    at: float
    process_cpu: float
    server_cpu: float
    census: Counter[tuple[str, str]]


def snapshot_cpu(url: str, census: Census) -> CpuSnapshot:
    return CpuSnapshot(
        time.perf_counter(), time.process_time(), server_cpu_seconds(url), census.snapshot()
    )


# --------------------------------------------------------------------------- yuxi


class Submitter:
    """Keeps ``backlog`` runs submitted and not finished, from a thread of its own (its
    own event loop and connection), until drained. Conversations come from ``threads``
    (one each); when they run out it creates more. It looks for finished runs every
    ``poll`` seconds or, with ``listen``, when the run events channel says something
    happened (run_finish notifies it), and at the latest after ``poll`` seconds."""

    def __init__(
        self,
        url: str,
        uid: UUID,
        threads: collections.deque[UUID],
        backlog: int,
        poll: float,
        listen: bool = False,
    ) -> None:
        self.url = url
        self.uid = uid
        self.threads = threads
        self.backlog = backlog
        self.poll = poll
        self.listen = listen
        self.submitted = 0
        self.finished: Counter[str] = Counter()
        self.outstanding = 0
        self.created = 0
        self.error: BaseException | None = None
        self._final_cpu = 0.0
        self._feeding = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="bench-submitter", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def idle(self) -> bool:
        """Every run submitted so far has finished (with backlog 0: nothing will come)."""
        return sum(self.finished.values()) == self.submitted

    def cpu_seconds(self) -> float:
        """CPU time of the submitter thread so far."""
        ident = self._thread.ident
        if ident is None or not self._thread.is_alive():
            return self._final_cpu
        return time.clock_gettime(time.pthread_getcpuclockid(ident))

    async def drain(self, within: float = 120.0) -> None:
        """Stops submitting; returns once every submitted run has finished."""
        self._feeding = False
        await asyncio.to_thread(self._thread.join, within)
        if self._thread.is_alive():
            self._stop.set()
            raise RuntimeError(f"{self.outstanding} runs still outstanding after {within} s")
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        self._stop.set()

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as error:  # handed to the main thread by drain()
            self.error = error
        finally:
            self._final_cpu = time.thread_time()

    async def _run(self) -> None:
        conn = await connect(self.url)
        listener = await connect(self.url, [f"LISTEN {EVENTS_CHANNEL}"]) if self.listen else None
        pending: set[UUID] = set()
        try:
            while not self._stop.is_set():
                if pending:
                    cur = await conn.execute(FINISHED_AMONG, (list(pending),))
                    for run_id, status in await cur.fetchall():
                        pending.discard(run_id)
                        self.finished[status] += 1
                while self._feeding and len(pending) < self.backlog:
                    pending.add(await self._submit(conn))
                self.outstanding = len(pending)
                if not self._feeding and not pending:
                    return
                if listener is None:
                    await asyncio.sleep(self.poll)
                else:
                    async for _ in listener.notifies(timeout=self.poll, stop_after=1):
                        pass
        finally:
            await conn.close()
            if listener is not None:
                await listener.close()

    async def _submit(self, conn: AsyncConnection[Any]) -> UUID:
        if not self.threads:
            cur = await conn.execute(MORE_THREADS, (self.uid, THREAD_CHUNK))
            self.threads.extend(row[0] for row in await cur.fetchall())
            self.created += THREAD_CHUNK
        thread = self.threads.popleft()
        info = await request_submit(conn, uid=self.uid, thread_id=thread, query=QUERY)
        if info.run_id is None:
            raise RuntimeError(f"conversation {thread} was not idle: {info}")
        self.submitted += 1
        return info.run_id


@dataclass
class YuxiSide:
    url: str
    uid: UUID
    threads: collections.deque[UUID]
    submitted: int = 0
    finished: Counter[str] = field(default_factory=Counter)
    created: int = 0

    def settings(self, home: Path, args: argparse.Namespace, concurrency: int) -> Settings:
        return Settings(
            home=home,
            worker_concurrency=concurrency,
            maintenance_seconds=args.maintenance_seconds,
            shutdown_grace_seconds=10.0,
        ).validated()

    @contextlib.asynccontextmanager
    async def running(
        self,
        args: argparse.Namespace,
        backlog: int,
        poll: float,
        concurrency: int,
        listen: bool = False,
    ) -> AsyncIterator[Submitter]:
        """A worker in this loop and a submitter thread; drained and stopped on exit."""
        with tempfile.TemporaryDirectory(prefix="yuxi-bench-worker-") as home:
            settings = self.settings(Path(home), args, concurrency)
            worker = asyncio.create_task(
                run_worker(self.url, settings, install_signal_handlers=False)
            )
            submitter = Submitter(self.url, self.uid, self.threads, backlog, poll, listen)
            submitter.start()
            try:
                yield submitter
                if worker.done():
                    worker.result()  # surface a worker failure
                await submitter.drain()
            finally:
                submitter.stop()
                worker.cancel()
                await asyncio.gather(worker, return_exceptions=True)
                self.submitted += submitter.submitted
                self.finished.update(submitter.finished)
                self.created += submitter.created

    async def round(self, label: str, args: argparse.Namespace, census: Census) -> RoundResult:
        conn = await connect(self.url)
        try:
            async with self.running(args, args.backlog, 0.05, args.concurrency) as submitter:
                await asyncio.sleep(args.warmup)
                first_count, first_at_db, first, first_sub = await self._snapshot(
                    conn, census, submitter
                )
                await asyncio.sleep(args.seconds)
                last_count, last_at_db, last, last_sub = await self._snapshot(
                    conn, census, submitter
                )
            cur = await conn.execute(WINDOW_LATENCIES, (first_at_db, last_at_db))
            rows = await cur.fetchall()
        finally:
            await conn.close()
        worker_cpu = (last.process_cpu - first.process_cpu) - (last_sub - first_sub)
        measured = Measured(
            label,
            last_count - first_count,
            last.at - first.at,
            worker_cpu,
            last.server_cpu - first.server_cpu,
        )
        return RoundResult(
            measured,
            latencies=[row[0] for row in rows],
            executing=[row[1] for row in rows],
            queued=[row[2] for row in rows],
            submitter_cpu=last_sub - first_sub,
            statements=Census.by_label(last.census - first.census),
        )

    async def _snapshot(
        self, conn: AsyncConnection[Any], census: Census, submitter: Submitter
    ) -> tuple[int, Any, CpuSnapshot, float]:
        cur = await conn.execute(COMPLETED)
        row = await cur.fetchone()
        assert row is not None
        return int(row[0]), row[1], snapshot_cpu(self.url, census), submitter.cpu_seconds()


# --------------------------------------------------------------------------- profile


BARE_MODES = (
    "bare: ainvoke",
    "bare: astream as the executor calls it",
    "bare: the same on a graph just built (build not timed)",
)


async def bare_call(
    graph: CompiledStateGraph[Any, Any, Any, Any], context: ChatBotContext, mode: str
) -> None:
    """One run of ``graph``: ainvoke, or astream with the executor's stream modes,
    recursion limit and loop over the parts."""
    config: RunnableConfig = {"configurable": {"thread_id": str(uuid4())}}
    graph_input = {"messages": [{"role": "user", "content": QUERY}]}
    if mode == BARE_MODES[0]:
        check_reply(await graph.ainvoke(graph_input, config, context=context))
        return
    config["recursion_limit"] = max(context.max_execution_steps, 1) * 2 + 1
    replies: list[Any] = []
    async for part in graph.astream(
        graph_input, config, context=context, stream_mode=["messages", "updates"], version="v2"
    ):
        if part["type"] == "updates":
            for update in part["data"].values():
                if isinstance(update, dict):
                    replies.extend(update.get("messages") or [])
    check_reply({"messages": replies})


async def wait_for(condition: Callable[[], bool], within: float = 120.0) -> None:
    deadline = time.perf_counter() + within
    while not condition():
        if time.perf_counter() > deadline:
            raise RuntimeError(f"still waiting after {within} s")
        await asyncio.sleep(0.02)


async def profile(side: YuxiSide, args: argparse.Namespace, census: Census) -> None:
    """--profile-runs runs one at a time through each side, step by step."""
    count = args.profile_runs
    phases = Phases()
    before = census.snapshot()
    functions = function_stats(side.url, track=True)
    # worker_concurrency 1: procrastinate then fetches only between runs, not during one
    async with side.running(args, 1, 0.1, concurrency=1, listen=True) as submitter:
        # let the worker start and warm up, then go idle before timing from the next run
        await wait_for(lambda: sum(submitter.finished.values()) >= 10)
        submitter.backlog = 0
        await wait_for(lambda: submitter.idle)
        base = submitter.submitted
        with phases.on_worker():
            census.active = True
            cpu, wall = time.thread_time(), time.perf_counter()
            server = server_cpu_seconds(side.url)
            submitter.backlog = 1
            await wait_for(lambda: submitter.submitted - base >= count)
            submitter.backlog = 0  # finish the last one, submit no more
            await wait_for(lambda: submitter.idle)
            yuxi_cpu, yuxi_wall = time.thread_time() - cpu, time.perf_counter() - wall
            yuxi_server = server_cpu_seconds(side.url) - server
            census.active = False
        runs = submitter.submitted - base
        tracked_runs = submitter.submitted
    yuxi_statements = census.snapshot() - before
    await asyncio.sleep(0.6)  # closed backends flush their statistics on exit
    functions = function_delta(functions, function_stats(side.url, track=False))
    with psycopg.connect(side.url, autocommit=True) as conn:
        rows = conn.execute(
            BENCH_TAG + "SELECT extract(epoch FROM started_at - created_at)::float8,"
            " extract(epoch FROM finished_at - started_at)::float8"
            " FROM yuxi.agent_runs WHERE status = 'completed'"
            " ORDER BY finished_at DESC LIMIT %s",
            (runs,),
        ).fetchall()
    queued = [row[0] * 1000 for row in rows]
    executing = [row[1] * 1000 for row in rows]

    # bare: the same graph one call at a time, as ainvoke and, to tell the graph's own
    # cost from the executor's, as the executor calls it; interleaved run by run
    bare = Phases()
    bare_census = census.snapshot()
    with tempfile.TemporaryDirectory(prefix="yuxi-bench-bare-") as workdir:
        context = resolved_context(workdir)
        async with saver_pool(side.url, args.concurrency) as pool:
            saver = AsyncPostgresSaver(pool)
            graph = await ChatBotAgent().get_graph(context, checkpointer=saver)
            for _ in range(10):  # warm up
                await bare_call(graph, context, BARE_MODES[0])
            census.active = True
            server = server_cpu_seconds(side.url)
            for _ in range(count):
                for mode in BARE_MODES:
                    used = graph
                    if mode == BARE_MODES[-1]:
                        used = await ChatBotAgent().get_graph(context, checkpointer=saver)
                    with bare.timed(mode):
                        await bare_call(used, context, mode)
            bare_server = server_cpu_seconds(side.url) - server
            census.active = False
    bare_statements = census.snapshot() - bare_census

    by_phase: Counter[str] = Counter()
    for (phase, _label), number in yuxi_statements.items():
        by_phase[phase] += number
    order = [*phases.wall, ""]
    rows_out = []
    for name in order:
        if name == "":
            spent_cpu = yuxi_cpu * 1000 - sum(phases.cpu.values()) * 1000
            rows_out.append(
                [
                    "outside these steps (worker loop, listener, maintenance)",
                    "",
                    f"{by_phase[''] / runs:.1f}",
                    "",
                    f"{spent_cpu / runs:.2f}",
                    "",
                ]
            )
            continue
        rows_out.append(
            [
                name,
                f"{phases.calls[name] / runs:.1f}",
                f"{by_phase[name] / runs:.1f}",
                f"{phases.wall[name] * 1000 / runs:.2f}",
                f"{phases.cpu[name] * 1000 / runs:.2f}",
                "",
            ]
        )
    total_statements = sum(yuxi_statements.values())
    rows_out.append(
        [
            "yuxi run (all of the above)",
            "",
            f"{total_statements / runs:.1f}",
            f"{yuxi_wall * 1000 / runs:.2f}",
            f"{yuxi_cpu * 1000 / runs:.2f}",
            f"{yuxi_server * 1000 / runs:.2f}",
        ]
    )
    bare_by_phase: Counter[str] = Counter()
    for (phase, _label), number in bare_statements.items():
        bare_by_phase[phase] += number
    for mode in BARE_MODES:
        rows_out.append(
            [
                mode,
                "1.0",
                f"{bare_by_phase[mode] / count:.1f}",
                f"{bare.wall[mode] * 1000 / count:.2f}",
                f"{bare.cpu[mode] * 1000 / count:.2f}",
                f"{bare_server * 1000 / count / len(BARE_MODES):.2f}"
                if mode == BARE_MODES[0]
                else "",
            ]
        )
    print_table(
        f"One run at a time, {runs} runs per side: per run, exclusive of nested steps"
        " (wall, and CPU of the event loop's thread; server CPU of the whole pass, for bare"
        " averaged over the three ways)",
        ["step", "calls", "statements", "wall ms", "cpu ms", "server cpu ms"],
        rows_out,
    )
    print(
        f"  yuxi: submit → claimed p50 {percentile(queued, 0.5):.2f} ms,"
        f" p99 {percentile(queued, 0.99):.2f} ms;"
        f" claimed → finished p50 {percentile(executing, 0.5):.2f} ms,"
        f" p99 {percentile(executing, 0.99):.2f} ms (agent_runs timestamps)"
    )

    print_census(
        f"SQL statements per run, one run at a time ({runs} runs per side)",
        {
            "yuxi": (Census.by_label(yuxi_statements), runs),
            "bare (each way)": (Census.by_label(bare_statements), count * len(BARE_MODES)),
        },
    )
    if functions:
        print_table(
            f"Server-side time in SQL functions per yuxi run (track_functions = all; the"
            f" {tracked_runs} runs of the pass, warm-up included; wall time in the function)",
            ["function", "calls", "total ms", "self ms"],
            [
                [
                    name,
                    f"{calls / tracked_runs:.2f}",
                    f"{total / tracked_runs:.3f}",
                    f"{own / tracked_runs:.3f}",
                ]
                for name, (calls, total, own) in sorted(
                    functions.items(), key=lambda item: -item[1][2]
                )[:15]
            ],
        )


FunctionStats = dict[str, tuple[int, float, float]]


def function_stats(url: str, *, track: bool) -> FunctionStats:
    """pg_stat_user_functions (calls, total and self ms) of this database; ``track`` turns
    track_functions on for new sessions of the database, False turns it back off. Empty
    when the server refuses (not a superuser)."""
    with psycopg.connect(url, autocommit=True) as conn:
        database = sql.Identifier(str(_one(conn, "SELECT current_database()")))
        setting = "SET track_functions = 'all'" if track else "RESET track_functions"
        try:
            conn.execute(sql.SQL("ALTER DATABASE {} " + setting).format(database))
        except psycopg.errors.InsufficientPrivilege:
            return {}
        rows = conn.execute(
            BENCH_TAG + "SELECT schemaname || '.' || funcname, sum(calls)::bigint,"
            " sum(total_time), sum(self_time) FROM pg_stat_user_functions GROUP BY 1"
        ).fetchall()
    return {str(name): (int(calls), float(total), float(own)) for name, calls, total, own in rows}


def function_delta(before: FunctionStats, after: FunctionStats) -> FunctionStats:
    delta = {}
    for name, (calls, total, own) in after.items():
        old = before.get(name, (0, 0.0, 0.0))
        if calls > old[0]:
            delta[name] = (calls - old[0], total - old[1], own - old[2])
    return delta


def _one(conn: psycopg.Connection[Any], query: str) -> Any:
    row = conn.execute(query).fetchone()
    return None if row is None else row[0]


def print_census(title: str, sides: dict[str, tuple[Counter[str], int]]) -> None:
    labels: dict[str, float] = collections.defaultdict(float)
    for counts, runs in sides.values():
        for label, number in counts.items():
            labels[label] += number / max(runs, 1)
    rows = [
        [label, *(f"{counts[label] / max(runs, 1):.2f}" for counts, runs in sides.values())]
        for label in sorted(labels, key=lambda name: -labels[name])
    ]
    rows.append(
        [
            "all statements",
            *(f"{sum(counts.values()) / max(runs, 1):.2f}" for counts, runs in sides.values()),
        ]
    )
    print_table(title, ["statement (what it calls)", *sides], rows)


# --------------------------------------------------------------------------- checks


def check_outcome(side: YuxiSide) -> list[str]:
    """Every submitted run completed with one assistant message, the reply; the worker
    resolved the Context the bare side uses."""
    problems = []
    with psycopg.connect(side.url, autocommit=True) as conn:
        statuses: dict[str, int] = dict(
            conn.execute(
                BENCH_TAG + "SELECT status, count(*) FROM yuxi.agent_runs GROUP BY status"
            ).fetchall()
        )
        wrong_output = conn.execute(
            BENCH_TAG + "SELECT count(*) FROM yuxi.agent_runs r WHERE r.status = 'completed' AND"
            " (SELECT count(*) FROM yuxi.messages m WHERE m.run_id = r.run_id"
            "  AND m.role = 'assistant' AND m.content = %s) <> 1",
            (REPLY,),
        ).fetchone()
        resources = conn.execute(
            BENCH_TAG + "SELECT DISTINCT manifest -> 'resources' FROM yuxi.agent_runs"
        ).fetchall()
    if statuses.get("completed", 0) != side.submitted or len(statuses) != 1:
        problems.append(f"runs by status {statuses}; {side.submitted} were submitted")
    if side.finished.get("completed", 0) != side.submitted:
        problems.append(f"the submitter saw {dict(side.finished)} of {side.submitted}")
    if wrong_output is None or wrong_output[0] != 0:
        problems.append(f"{wrong_output} completed runs without exactly one {REPLY!r} reply")
    context = resolved_context("")
    expected = {
        kind: list(getattr(context, kind) or [])
        for kind in ("tools", "knowledges", "mcps", "skills", "subagents")
    }
    if [row[0] for row in resources] != [expected]:
        problems.append(f"the worker resolved {resources}, the bare side uses {expected}")
    return problems


# --------------------------------------------------------------------------- main


@dataclass(frozen=True)
class Variant:
    label: str
    run: Callable[[], Awaitable[RoundResult]]


def ms(values: list[float], fraction: float) -> str:
    return f"{percentile(values, fraction) * 1000:.1f}" if values else "-"


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    url = database.url
    uid = seed_owner(url)
    started = time.perf_counter()
    threads = collections.deque(create_threads(url, uid, args.thread_pool))
    log(f"created {len(threads):,} conversations in {time.perf_counter() - started:.1f} s")
    side = YuxiSide(url, uid, threads)
    census = Census()
    with census.installed():
        if args.profile_runs:
            await profile(side, args, census)

        async def yuxi() -> RoundResult:
            return await side.round("yuxi", args, census)

        async def yuxi_cached() -> RoundResult:
            with graphs_cached():
                return await side.round("yuxi, graphs cached", args, census)

        async def bare() -> RoundResult:
            return await bare_round(url, "bare", args, census, build_per_run=False)

        async def bare_built() -> RoundResult:
            label = "bare, graph built per run"
            return await bare_round(url, label, args, census, build_per_run=True)

        async def yuxi_budget() -> RoundResult:
            with budget_on(url, uid):
                return await side.round("yuxi, budget on", args, census)

        variants = [Variant("bare", bare), Variant("yuxi", yuxi)]
        if args.budget:
            variants.append(Variant("yuxi, budget on", yuxi_budget))
        if args.diagnose_graph:
            variants += [
                Variant("bare, graph built per run", bare_built),
                Variant("yuxi, graphs cached", yuxi_cached),
            ]
        results: dict[str, list[RoundResult]] = {v.label: [] for v in variants}
        for round_no in range(args.rounds):
            for variant in variants if round_no % 2 == 0 else variants[::-1]:
                settle(url)
                census.active = True
                try:
                    result = await variant.run()
                finally:
                    census.active = False
                log(f"round {round_no + 1}: {variant.label}: {result.measured.rate:,.1f} runs/s")
                results[variant.label].append(result)

    totals = {
        label: functools.reduce(lambda a, b: a + b, (r.measured for r in rounds))
        for label, rounds in results.items()
    }
    base = totals["bare"]
    rows = []
    for label, total in totals.items():
        rounds = results[label]
        submitter = sum(r.submitter_cpu for r in rounds)
        every = total.server_ms_per_item + total.client_ms_per_item
        every += submitter / total.items * 1000 if total.items else 0.0
        rows.append(
            [
                label,
                f"{total.items:,}",
                f"{total.rate:,.1f}",
                " / ".join(f"{r.measured.rate:,.1f}" for r in rounds),
                f"{total.server_ms_per_item:.2f}",
                f"{total.client_ms_per_item:.2f}",
                f"{submitter / total.items * 1000:.2f}" if label.startswith("yuxi") else "-",
                f"{every:.2f}",
                f"{total.rate / base.rate:.2f}" if base.rate else "-",
            ]
        )
    print_table(
        f"Runs/s over {args.rounds} x {args.seconds:g} s (after {args.warmup:g} s warm-up),"
        f" concurrency {args.concurrency}, yuxi backlog {args.backlog}",
        [
            "variant",
            "runs",
            "runs/s",
            "per round",
            "server cpu ms/run",
            "client cpu ms/run",
            "submitter cpu ms/run",
            "all cpu ms/run",
            "vs bare",
        ],
        rows,
    )
    latency_rows = []
    for label, rounds in results.items():
        overall = [v for r in rounds for v in r.latencies]
        executing = [v for r in rounds for v in r.executing]
        queued = [v for r in rounds for v in r.queued]
        if label.startswith("yuxi"):
            latency_rows.append([label, "submit → completed", ms(overall, 0.5), ms(overall, 0.99)])
            latency_rows.append([label, "submit → claimed", ms(queued, 0.5), ms(queued, 0.99)])
            latency_rows.append(
                [label, "claimed → finished", ms(executing, 0.5), ms(executing, 0.99)]
            )
        else:
            latency_rows.append([label, "one ainvoke", ms(overall, 0.5), ms(overall, 0.99)])
    print_table(
        "Latency of the runs counted (ms)", ["variant", "interval", "p50", "p99"], latency_rows
    )
    print_census(
        "SQL statements per run in the windows (this process's main thread)",
        {
            label: (sum((r.statements for r in rounds), Counter()), totals[label].items)
            for label, rounds in results.items()
        },
    )
    print(
        f"  yuxi: {side.submitted:,} runs submitted in all ({side.created:,} conversations"
        f" created on the way), finished: {dict(side.finished)}"
    )

    problems = check_outcome(side)
    if args.budget:
        problems += check_budget(url, uid)
    for problem in problems:
        print(f"  CHECK FAILED: {problem}")
    ratio = totals["yuxi"].rate / base.rate if base.rate else 0.0
    ok = ratio >= TARGET_RATIO and not problems
    print(f"\nTarget: yuxi ≥ {TARGET_RATIO:g} x bare. Measured {ratio:.2f}x: {verdict(ok)}")
    if args.budget:
        budget = totals["yuxi, budget on"].rate / totals["yuxi"].rate
        budget_ok = budget >= BUDGET_TARGET and not problems
        print(
            f"Target: yuxi with a budget ≥ {BUDGET_TARGET:g} x yuxi without."
            f" Measured {budget:.2f}x: {verdict(budget_ok)}"
        )
        ok = ok and budget_ok
    return 0 if ok else 1


BUDGET_TARGET = 0.95
# builtin:scripted at 1 credit per million tokens in and out: every run freezes
# 2 x 4096 / 1e6 and is charged its few hundred tokens' worth
PRICED_SCRIPTED = (
    '{"spec": "builtin:scripted", "name": "scripted, priced", "price_input_per_mtok": 1,'
    ' "price_output_per_mtok": 1}'
)


@contextlib.contextmanager
def budget_on(url: str, uid: UUID) -> Iterator[None]:
    """For one round: the runs' model priced, their user with a balance for all of them."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT yuxi.model_create(gen_random_uuid(), NULL, %s::jsonb)", (PRICED_SCRIPTED,)
        )
        conn.execute("SELECT yuxi.credit_add(%s, 1000000000, NULL, 'benchmark')", (uid,))
    try:
        yield
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM yuxi.models WHERE spec = 'builtin:scripted'")


def check_budget(url: str, uid: UUID) -> list[str]:
    """Every hold settled once, the balance its ledger's sum, every budgeted run charged."""
    with psycopg.connect(url, autocommit=True) as conn:
        held = _one(conn, "SELECT count(*) FROM yuxi.credit_holds WHERE status = 'held'")
        holds = _one(conn, "SELECT count(*) FROM yuxi.credit_holds")
        mismatched = _one(conn, "SELECT count(*) FROM yuxi.credit_mismatches")
        charges = _one(conn, "SELECT count(*) FROM yuxi.credit_ledger WHERE kind = 'charge'")
    problems = []
    if held:
        problems.append(f"{held} credit holds still held after the runs ended")
    if mismatched:
        problems.append(f"{mismatched} credit accounts differ from their ledger")
    if not holds or charges != holds:
        problems.append(f"{holds} runs froze credits but {charges} were charged")
    print(f"  budget: {holds:,} runs froze, settled and were charged once each")
    return problems


def main(argv: list[str] | None = None) -> int:
    return run_benchmark(
        "throughput",
        "run throughput (submit → worker → graph → completed)",
        parse_args(argv),
        measure,
    )


if __name__ == "__main__":
    raise SystemExit(main())
