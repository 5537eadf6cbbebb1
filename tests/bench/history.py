"""History read: ``GET /api/chat/thread/{id}/history`` of one long conversation.

Build (timed): one conversation gets --runs runs, each through the real queue
functions in a DO block, --chunk runs per transaction: ``yuxi.request_submit`` (the
thread is idle, so the user message, the request and a pending run are written and the
delivery job deferred), ``yuxi.run_claim`` (pending → running), ``yuxi.run_finish``
(running → completed with one assistant reply; writes the ``end`` event). So the thread
holds --runs runs and 2 × --runs messages (a user message of about --query-chars and a
reply of about --reply-chars each), written exactly as production writes them.

Measurement: the API runs as a process of its own (``uv run yuxi api`` on a free port,
default pool), and one client reads the history --iterations times per variant, in
blocks of --block alternating between variants (ABBA), after --warmup untimed reads each:

- ``http``: ``GET /api/chat/thread/{id}/history`` over one keep-alive connection of a
  minimal HTTP/1.1 client (the request written, the head read, the body read by its
  chunks, not parsed: what curl does), timed until the whole body has arrived
  (the JSON is parsed once, untimed, to check it); the target is checked on this one;
- ``httpx``: the same GET through one keep-alive httpx connection, whose own work
  (h11 parsing a 6 MB body in Python) is part of its time;
- ``reads``: the read the endpoint makes (``yuxi.queue.thread_history``: in one
  snapshot, the thread, then the runs' and messages' stored ``history_entry`` joined in
  chunks of 256 by ``yuxi.thread_history_runs``/``thread_history_messages``, streamed
  and not parsed), in this process on one
  connection: the endpoint's database work without HTTP and auth;
- ``sql``: the same data as rows, the raw SQL read: the three SQL functions called
  directly on one connection (``SELECT * FROM yuxi.thread_get(…)``, ``yuxi.thread_runs``,
  ``yuxi.thread_messages``), rows fetched as tuples.

With --before FILE (the definitions of an earlier version, e.g. the functions as a
migration left them): ``http before`` and ``reads before`` too, the same reads with
FILE's functions in place, in the same ABBA blocks (FILE is run before each of their
blocks and the current definitions restored after): a before/after comparison under the
same load, with the bodies checked to be identical.

Also printed: the response size, and the CPU per read of the API process, of the
PostgreSQL server (when local) and of this process.

Then (--profile-reads) where a read's time goes, each step timed on its own in this
process, one at a time: the server's share of the endpoint's read (the response's
chunks built, only their total length sent back), the endpoint's own handler
(``ThreadsController.history`` on a one-connection pool: the read and the Stream);
for comparison, the rows' path: the server's share (the three functions with every row
turned into text, one value back), the rows' transfer (``COPY (SELECT * FROM …) TO
STDOUT``, not parsed) and the rows fetched and parsed by psycopg (as ``sql``); and the
JSON built from the rows at read time (``json_agg``, no stored entries) as one value.

Target: p50 of ``http`` ≤ 50 ms.

    uv run python -m tests.bench.history [--runs 5000] [--iterations 200]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import pstats
import re
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

import httpx
import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from tests.bench.api_process import (
    ApiProcess,
    add_api_diagnostics,
    api_process,
    mib,
    seed_api_owner,
)
from tests.bench.harness import (
    AGENT,
    BenchDatabase,
    connect,
    log,
    percentile,
    print_table,
    run_benchmark,
    server_cpu_seconds,
    settle,
    verdict,
)
from yuxi.api.auth import User
from yuxi.api.routes.threads import ThreadsController
from yuxi.queue.threads import thread_history

TARGET_P50_MS = 50.0

BUILD = """
DO $$
DECLARE
    v_run uuid;
    v_token uuid;
BEGIN
    FOR i IN {first}..{last} LOOP
        v_run := (yuxi.request_submit({uid}, {thread},
                      'question ' || i || ': ' || repeat('how does this work? ', {query_repeat}),
                      'hist-' || i)).run_id;
        v_token := (yuxi.run_claim(v_run, 'bench', 600)).lease_token;
        PERFORM yuxi.run_finish(v_run, v_token, 'completed',
            jsonb_build_array(jsonb_build_object(
                'role', 'assistant',
                'content', 'answer ' || i || ': ' || repeat('it works like this. ', {reply_repeat}),
                'metadata', jsonb_build_object('model', 'builtin:scripted'))),
            NULL, NULL, NULL, false);
    END LOOP;
END;
$$
"""
SERVER_RENDER = (
    "SELECT octet_length(yuxi.thread_json(yuxi.thread_get(%(u)s, %(t)s)))",
    "SELECT sum(octet_length(entries)) FROM yuxi.thread_history_runs(%(u)s, %(t)s)",
    "SELECT sum(octet_length(entries)) FROM yuxi.thread_history_messages(%(u)s, %(t)s)",
)
SERVER_ONLY = (
    "SELECT sum(length(x::text)) FROM yuxi.thread_get(%(u)s, %(t)s) x",
    "SELECT sum(length(x::text)) FROM yuxi.thread_runs(%(u)s, %(t)s) x",
    "SELECT sum(length(x::text)) FROM yuxi.thread_messages(%(u)s, %(t)s) x",
)
COPY_OUT = (
    "COPY (SELECT * FROM yuxi.thread_get({u}, {t})) TO STDOUT",
    "COPY (SELECT * FROM yuxi.thread_runs({u}, {t})) TO STDOUT",
    "COPY (SELECT * FROM yuxi.thread_messages({u}, {t})) TO STDOUT",
)
SERVER_JSON = """
SELECT json_build_object(
    'thread', (SELECT row_to_json(x) FROM yuxi.thread_get(%(u)s, %(t)s) x),
    'runs', (SELECT json_agg(x) FROM yuxi.thread_runs(%(u)s, %(t)s) x),
    'history', (SELECT json_agg(x) FROM yuxi.thread_messages(%(u)s, %(t)s) x))::text
"""
RAW = (
    "SELECT * FROM yuxi.thread_get(%(u)s, %(t)s)",
    "SELECT * FROM yuxi.thread_runs(%(u)s, %(t)s)",
    "SELECT * FROM yuxi.thread_messages(%(u)s, %(t)s)",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.history",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=5_000, help="runs (2 messages each)")
    parser.add_argument("--chunk", type=int, default=500, help="runs built per transaction")
    parser.add_argument("--query-chars", type=int, default=80, help="about this long: questions")
    parser.add_argument("--reply-chars", type=int, default=400, help="about this long: replies")
    parser.add_argument("--iterations", type=int, default=200, help="timed reads per variant")
    parser.add_argument("--warmup", type=int, default=5, help="untimed reads per variant first")
    parser.add_argument("--block", type=int, default=20, help="reads per variant in a row")
    parser.add_argument(
        "--profile-reads", type=int, default=20, help="reads per profiled step (0: skip)"
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="SQL file of CREATE OR REPLACE FUNCTION yuxi.… to compare with, block by block",
    )
    add_api_diagnostics(parser, gc_freeze=True)
    return parser.parse_args(argv)


class RawHttpClient:
    """A minimal keep-alive HTTP/1.1 client for GETs: the body is read by its
    Content-Length or its chunks and returned unparsed, so the timing holds little
    client work."""

    def __init__(self, base_url: str, token: str) -> None:
        address = urlsplit(base_url)
        self.host, self.port = address.hostname or "127.0.0.1", address.port or 80
        self.token = token
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def get(self, path: str) -> tuple[int, bytes]:
        """One GET; when the server has closed the idle connection, again on a new one."""
        try:
            return await self._get(path)
        except asyncio.IncompleteReadError as error:
            if error.partial:
                raise
        await self.close()
        await self.open()
        return await self._get(path)

    async def _get(self, path: str) -> tuple[int, bytes]:
        assert self.reader is not None and self.writer is not None
        self.writer.write(
            f"GET {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Authorization: Bearer {self.token}\r\n\r\n".encode()
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
        if length is not None:
            return status, await self.reader.readexactly(int(length.group(1)))
        if re.search(rb"(?i)\r\ntransfer-encoding:\s*chunked", head) is None:
            raise RuntimeError(f"neither Content-Length nor chunked: {head[:300]!r}")
        pieces = []
        while size := int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16):
            pieces.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)
        await self.reader.readuntil(b"\r\n")  # no trailers
        return status, b"".join(pieces)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            await self.writer.wait_closed()


@dataclass
class Timings:
    label: str
    seconds: list[float] = field(default_factory=list)
    api_cpu: float = 0.0
    api_wait: float = 0.0
    server_cpu: float = 0.0
    client_cpu: float = 0.0

    def ms(self, fraction: float) -> float:
        return percentile(self.seconds, fraction) * 1000

    def per_read_ms(self, cpu: float) -> float:
        return cpu / len(self.seconds) * 1000 if self.seconds else float("nan")


def build_thread(url: str, uid: UUID, args: argparse.Namespace) -> tuple[UUID, float]:
    """The long conversation; returns it and the seconds its runs took to build."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT (yuxi.thread_create(%s, %s, NULL, 'a long conversation')).thread_id",
            (uid, AGENT),
        ).fetchone()
        assert row is not None
        thread = UUID(str(row[0]))
        started = time.perf_counter()
        for first in range(1, args.runs + 1, args.chunk):
            last = min(first + args.chunk - 1, args.runs)
            conn.execute(
                sql.SQL(BUILD).format(
                    first=sql.Literal(first),
                    last=sql.Literal(last),
                    uid=sql.Literal(uid),
                    thread=sql.Literal(thread),
                    query_repeat=sql.Literal(max(1, args.query_chars // 20)),
                    reply_repeat=sql.Literal(max(1, args.reply_chars // 20)),
                )
            )
        elapsed = time.perf_counter() - started
    return thread, elapsed


def check_thread(url: str, thread: UUID, runs: int) -> list[str]:
    problems = []
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM yuxi.agent_runs WHERE thread_id = %(t)s),"
            " (SELECT count(*) FROM yuxi.agent_runs WHERE thread_id = %(t)s"
            "   AND status = 'completed'),"
            " (SELECT count(*) FROM yuxi.messages WHERE thread_id = %(t)s),"
            " (SELECT count(*) FROM yuxi.messages WHERE thread_id = %(t)s AND role = 'user'"
            "   AND delivery_status = 'complete'),"
            " (SELECT count(*) FROM yuxi.run_events e JOIN yuxi.agent_runs r USING (run_id)"
            "   WHERE r.thread_id = %(t)s AND e.event = 'end')",
            {"t": thread},
        ).fetchone()
    assert row is not None
    total, completed, messages, delivered, ends = row
    if total != runs or completed != runs or ends != runs:
        problems.append(f"{total} runs, {completed} completed, {ends} end events; {runs} expected")
    if messages != 2 * runs or delivered != runs:
        problems.append(f"{messages} messages ({delivered} delivered user messages)")
    return problems


def check_history(body: dict[str, Any], thread: UUID, runs: int) -> list[str]:
    problems = []
    if body["thread"]["id"] != str(thread):
        problems.append(f"history of {body['thread']['id']}, not {thread}")
    if len(body["runs"]) != runs or any(r["status"] != "completed" for r in body["runs"]):
        problems.append(f"history lists {len(body['runs'])} runs, not {runs} completed ones")
    ids = [m["id"] for m in body["history"]]
    if len(ids) != 2 * runs or ids != sorted(ids):
        problems.append(f"history lists {len(ids)} messages (in order: {ids == sorted(ids)})")
    return problems


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    url = database.url
    uid, token = seed_api_owner(url)
    thread, build_seconds = build_thread(url, uid, args)
    log(
        f"built {args.runs:,} runs and {2 * args.runs:,} messages on one conversation"
        f" in {build_seconds:.1f} s ({args.runs / build_seconds:,.0f} runs/s)"
    )
    problems = check_thread(url, thread, args.runs)
    settle(url)
    with tempfile.TemporaryDirectory(prefix="yuxi-bench-gc-") as scratch:
        gc_file = Path(scratch) / "gc" if args.api_gc else None
        with api_process(
            url, profile_to=args.profile_api, gc_to=gc_file, gc_freeze=args.api_gc_freeze
        ) as api:
            log(f"API: {api.describe()}")
            status = await measure_reads(
                url, api, uid, token, thread, build_seconds, problems, args
            )
        if gc_file is not None:
            seconds, collections = gc_file.read_text().split()
            reads_served = 1 + args.warmup + args.iterations
            print(
                f"  API garbage collection: {float(seconds):.2f} s in {collections}"
                f" collections over the API's life, {reads_served} history reads:"
                f" {float(seconds) / reads_served * 1000:.1f} ms per read"
            )
    if args.profile_api:
        print(f"\nAPI process under cProfile ({args.profile_api}), top 30 by own time:")
        pstats.Stats(str(args.profile_api)).sort_stats("tottime").print_stats(30)
    if args.profile_reads:
        await profile(url, uid, thread, args.profile_reads)
    return status


async def profile(url: str, uid: UUID, thread: UUID, count: int) -> None:
    """Where a read's time goes, step by step, each step timed on its own."""
    params = {"u": uid, "t": thread}
    conn = await connect(url)
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url, min_size=1, max_size=1, open=False, kwargs={"autocommit": True}
    )
    await pool.open()
    state = SimpleNamespace(yuxi=SimpleNamespace(pool=pool))
    user = User(uid=uid, name="bench", is_admin=False)
    handler = ThreadsController.history.fn
    copied: list[int] = []
    rendered: list[int] = []
    built: list[int] = []

    async def server_render() -> None:
        size = 0
        for query in SERVER_RENDER:
            cur = await conn.execute(query, params)
            row = await cur.fetchone()
            assert row is not None
            size += row[0] or 0
        rendered.append(size)

    async def server_only() -> None:
        for query in SERVER_ONLY:
            await conn.execute(query, params)

    async def copy_out() -> None:
        size = 0
        for query in COPY_OUT:
            statement = sql.SQL(query).format(u=sql.Literal(uid), t=sql.Literal(thread))
            async with conn.cursor().copy(statement) as copy:
                async for data in copy:
                    size += len(data)
        copied.append(size)

    async def fetch_rows() -> None:
        for query in RAW:
            cur = await conn.execute(query, params)
            await cur.fetchall()

    async def server_json() -> None:
        cur = await conn.execute(SERVER_JSON, params)
        row = await cur.fetchone()
        assert row is not None
        built.append(len(row[0]))

    async def run_handler() -> None:
        response = await handler(None, state, user, thread)
        async for _ in response.iterator:
            pass

    steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
        ("server: the response's chunks, their length back", server_render),
        ("the endpoint's handler: the read + Stream, consumed", run_handler),
        ("rows: 3 functions on the server, rows to text, 1 value back", server_only),
        ("rows: COPY the same rows as text, unparsed", copy_out),
        ("rows: fetch + parse (psycopg, tuples) = sql", fetch_rows),
        ("rows: JSON built at read time (json_agg), one text value", server_json),
    ]
    wall: dict[str, list[float]] = {name: [] for name, _ in steps}
    cpu: dict[str, float] = dict.fromkeys(wall, 0.0)
    server: dict[str, float] = dict.fromkeys(wall, 0.0)
    try:
        for _ in range(2):  # warm-up
            for _, step in steps:
                await step()
        for _ in range(count):
            for name, step in steps:
                gc.collect()  # each step starts from the same heap, not the last one's garbage
                before_server = server_cpu_seconds(url)
                before_cpu = time.process_time()
                started = time.perf_counter()
                await step()
                wall[name].append(time.perf_counter() - started)
                cpu[name] += time.process_time() - before_cpu
                server[name] += server_cpu_seconds(url) - before_server
    finally:
        await pool.close()
        await conn.close()
    print_table(
        f"Where a read goes, in this process, {count} reads per step (ms per read)",
        ["step", "p50 wall", "mean wall", "this process cpu", "server cpu"],
        [
            [
                name,
                f"{percentile(wall[name], 0.5) * 1000:.1f}",
                f"{statistics.mean(wall[name]) * 1000:.1f}",
                f"{cpu[name] / count * 1000:.1f}",
                f"{server[name] / count * 1000:.1f}",
            ]
            for name, _ in steps
        ],
    )
    print(
        f"  the response's chunks hold {rendered[-1]:,} bytes; COPY moved {copied[-1]:,}"
        f" bytes of rows as text; the JSON built with json_agg (not the API's shape: no"
        f" nested timing) is {built[-1]:,} characters"
    )


async def measure_reads(
    url: str,
    api: ApiProcess,
    uid: UUID,
    token: str,
    thread: UUID,
    build_seconds: float,
    problems: list[str],
    args: argparse.Namespace,
) -> int:
    params = {"u": uid, "t": thread}
    path = f"/api/chat/thread/{thread}/history"
    sizes: list[int] = []
    raw_rows: list[int] = []
    conn = await connect(url)
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url, min_size=1, max_size=1, open=False, kwargs={"autocommit": True}
    )
    await pool.open()
    client = httpx.AsyncClient(
        base_url=api.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60.0
    )
    raw = RawHttpClient(api.base_url, token)
    await raw.open()

    async def http_read() -> None:
        status, body = await raw.get(path)
        if status != 200:
            raise RuntimeError(f"GET {path}: {status} {body[:300]!r}")
        sizes.append(len(body))

    async def httpx_read() -> None:
        response = await client.get(path)
        body = await response.aread()
        if response.status_code != 200:
            raise RuntimeError(f"GET {path}: {response.status_code} {body[:300]!r}")
        sizes.append(len(body))

    async def reads_read() -> None:
        async for _ in thread_history(pool, uid, thread):
            pass

    async def sql_read() -> None:
        count = 0
        for query in RAW:
            cur = await conn.execute(query, params)
            count += len(await cur.fetchall())
        raw_rows.append(count)

    variants: dict[str, Callable[[], Awaitable[None]]] = {
        "http": http_read,
        "httpx": httpx_read,
        "reads": reads_read,
        "sql": sql_read,
    }
    # label -> (SQL putting the earlier functions in place, SQL restoring the current ones)
    switches: dict[str, tuple[str, str]] = {}
    if args.before is not None:
        switch = await before_switch(conn, args.before.read_text())
        for label in ("http", "reads"):
            variants[f"{label} before"] = variants[label]
            switches[f"{label} before"] = switch
    timings = {label: Timings(label) for label in variants}
    try:
        response = await client.get(path)
        problems += check_history(response.json(), thread, args.runs)
        content_length = len(response.content)
        if switches:
            enter, leave = switches["http before"]
            await conn.execute(enter)
            _, before_body = await raw.get(path)
            await conn.execute(leave)
            if before_body != response.content:
                problems.append("the --before functions give another body than the current ones")
        for label, read in variants.items():
            enter, leave = switches.get(label, ("", ""))
            if enter:
                await conn.execute(enter)
            for _ in range(args.warmup):
                await read()
            if leave:
                await conn.execute(leave)
        blocks = -(-args.iterations // args.block)
        for block in range(blocks):
            order = list(variants) if block % 2 == 0 else list(variants)[::-1]
            count = min(args.block, args.iterations - block * args.block)
            for label in order:
                enter, leave = switches.get(label, ("", ""))
                if enter:
                    await conn.execute(enter)
                await timed_block(url, api, variants[label], timings[label], count)
                if leave:
                    await conn.execute(leave)
            if block % 2 == 1 or block == blocks - 1:
                shown = ", ".join(f"{t.label} p50 {t.ms(0.5):.1f} ms" for t in timings.values())
                log(f"{sum(len(t.seconds) for t in timings.values()):,} reads: {shown}")
    finally:
        await raw.close()
        await client.aclose()
        await pool.close()
        await conn.close()

    rows = [
        [
            t.label,
            f"{len(t.seconds):,}",
            f"{t.ms(0.5):.1f}",
            f"{t.ms(0.99):.1f}",
            f"{statistics.mean(t.seconds) * 1000:.1f}",
            f"{min(t.seconds) * 1000:.1f}",
            f"{t.per_read_ms(t.api_cpu):.1f}" if t.label.startswith("http") else "-",
            f"{t.per_read_ms(t.api_wait):.1f}" if t.label.startswith("http") else "-",
            f"{t.per_read_ms(t.server_cpu):.1f}",
            f"{t.per_read_ms(t.client_cpu):.1f}",
            f"{t.ms(0.5) / timings['sql'].ms(0.5):.1f}x",
        ]
        for t in timings.values()
    ]
    print_table(
        f"History of 1 conversation ({args.runs:,} runs, {2 * args.runs:,} messages),"
        f" {args.iterations} reads per variant, one at a time (ms)",
        [
            "variant",
            "reads",
            "p50",
            "p99",
            "mean",
            "min",
            "API cpu/read",
            "API waited/read",
            "server cpu/read",
            "client cpu/read",
            "p50 vs sql",
        ],
        rows,
    )
    body = json.loads(response.content)
    print(
        f"  response: {content_length:,} bytes ({mib(content_length)} MiB) of JSON,"
        f" {len(body['runs']):,} runs and {len(body['history']):,} messages"
        f" (every read: {min(sizes):,}..{max(sizes):,} bytes);"
        f" sql read: {raw_rows[-1]:,} rows"
    )
    rate = args.runs / build_seconds
    print(f"  build: {build_seconds:.1f} s for {args.runs:,} runs ({rate:,.0f}/s)")
    sample = api.sample()
    print(f"  API process: RSS {mib(sample.rss_bytes)} MiB (peak {mib(sample.hwm_bytes)} MiB)")
    for label in ("http", "reads"):
        if f"{label} before" in timings:
            now, then = timings[label], timings[f"{label} before"]
            print(
                f"  {label}: p50 {now.ms(0.5):.1f} ms, {then.ms(0.5):.1f} ms with --before's"
                f" functions ({now.ms(0.5) / then.ms(0.5):.2f}x); p99 {now.ms(0.99):.1f}"
                f" against {then.ms(0.99):.1f} ms"
            )
    for problem in problems:
        print(f"  CHECK FAILED: {problem}")

    p50 = timings["http"].ms(0.5)
    ok = p50 <= TARGET_P50_MS and not problems
    ratio = p50 / timings["sql"].ms(0.5)
    print(
        f"\nTarget: http p50 ≤ {TARGET_P50_MS:g} ms. Measured p50 {p50:.1f} ms"
        f" (p99 {timings['http'].ms(0.99):.1f} ms; {ratio:.1f}x the raw SQL read): {verdict(ok)}"
    )
    return 0 if ok else 1


async def before_switch(conn: psycopg.AsyncConnection[Any], before: str) -> tuple[str, str]:
    """The SQL that puts --before's functions in place, and the SQL that restores the
    current definitions of the same functions (read from the catalog)."""
    names = sorted(set(re.findall(r"(?i)FUNCTION\s+yuxi\.(\w+)", before)))
    cur = await conn.execute(
        "SELECT pg_get_functiondef(p.oid) FROM pg_proc p"
        " WHERE p.pronamespace = 'yuxi'::regnamespace AND p.proname = ANY(%s)",
        (names,),
    )
    current = ";\n".join(row[0] for row in await cur.fetchall())
    if not names or not current:
        raise SystemExit(f"--before: no current yuxi function among {names}")
    return before, current


async def timed_block(
    url: str, api: ApiProcess, read: Callable[[], Awaitable[None]], into: Timings, count: int
) -> None:
    api_before = api.sample()
    server = server_cpu_seconds(url)
    client = time.process_time()
    for _ in range(count):
        started = time.perf_counter()
        await read()
        into.seconds.append(time.perf_counter() - started)
    into.client_cpu += time.process_time() - client
    into.server_cpu += server_cpu_seconds(url) - server
    api_after = api.sample()
    into.api_cpu += api_after.cpu_seconds - api_before.cpu_seconds
    into.api_wait += api_after.wait_seconds - api_before.wait_seconds


def main(argv: list[str] | None = None) -> int:
    return run_benchmark(
        "history", "history (GET /api/chat/thread/{id}/history)", parse_args(argv), measure
    )


if __name__ == "__main__":
    raise SystemExit(main())
