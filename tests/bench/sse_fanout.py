"""SSE fan-out: many clients streaming one run's events through one API process.

- The API runs as a process of its own (``uv run yuxi api`` on a free port, default pool
  of 10 connections, one LISTEN connection), so its CPU and memory are measured alone.
- The benchmark submits one request, claims the run itself (as a worker would) and
  appends a first ``metadata`` event.
- --clients SSE clients (httpx, each with a client and connection of its own) in a child
  process of their own open ``GET /api/agent/runs/{id}/events``; once every one has
  received the ``metadata`` event, the benchmark appends --events ``messages`` events in
  batches of --batch, one append every --gap-ms, each with ``run_append_events(…,
  notify_after_commit=True)`` as the worker's EventWriter does (the NOTIFY from a
  transaction of its own right after the commit), then finishes the run
  (``run_finish(…, notify_after_commit=True)``: the ``end`` event).
- Checks: every client received every event exactly once, in seq order, each with its
  own payload, and exactly one ``end``, last.
- Latency of an event: from the moment its append (commit and NOTIFY) returned in the
  benchmark to the moment a client had read it (one monotonic clock across processes);
  "end → last client": from ``run_finish`` returning to the last client reading ``end``.
- CPU (user and system, from /proc) and resident memory of the API process: idle, while
  the clients connect, and during the stream. With a superuser, the API's calls of
  ``yuxi.run_events_after`` and ``yuxi.run_get`` are counted from pg_stat_user_functions
  (``track_functions = all`` set on the benchmark's database).

No target is set for this benchmark; it reports.

    uv run python -m tests.bench.sse_fanout [--clients 200] [--events 500] [--batch 10]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import pstats
import queue
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import psycopg
from psycopg import sql

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
from yuxi.queue.events import RunEvent, run_append_events
from yuxi.queue.requests import request_submit
from yuxi.queue.runs import OutputMessage, run_claim, run_finish

LEASE_SECONDS = 600.0
FILLER = "lorem ipsum " * 8  # about 100 characters of streamed text per event
COUNTED = ("transactions", "run_events scans", "run_get")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.sse_fanout",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--clients", type=int, default=200, help="concurrent SSE clients")
    parser.add_argument("--events", type=int, default=500, help="messages events appended")
    parser.add_argument("--batch", type=int, default=10, help="events per append")
    parser.add_argument("--gap-ms", type=float, default=20.0, help="pause between appends")
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds the clients may take in all"
    )
    add_api_diagnostics(parser)
    parser.add_argument(
        "--stats-wait",
        type=float,
        default=11.0,
        help="seconds to let idle sessions report statistics before reading them (0: skip)",
    )
    return parser.parse_args(argv)


# --------------------------------------------------------------------------- clients


Received = list[tuple[int, str, float, bool]]  # seq, event, read at, payload was its own


def client_process(
    base_url: str,
    token: str,
    run_id: str,
    clients: int,
    timeout: float,
    ready: multiprocessing.Queue[Any],
    results: multiprocessing.Queue[Any],
) -> None:
    """The child process: every client's events, and its CPU seconds so far."""
    try:
        received, errors = asyncio.run(
            _run_clients(base_url, token, run_id, clients, timeout, ready)
        )
    except BaseException as error:  # reported to the parent, which fails the check
        results.put(([], [f"client process: {type(error).__name__}: {error}"], 0.0))
        raise
    results.put((received, errors, time.process_time()))


async def _run_clients(
    base_url: str,
    token: str,
    run_id: str,
    clients: int,
    seconds: float,
    ready: multiprocessing.Queue[Any],
) -> tuple[list[Received], list[str]]:
    received: list[Received] = [[] for _ in range(clients)]
    errors: list[str] = []
    warmed = 0
    tls = httpx.create_ssl_context()  # built once: each client would build its own
    connecting = time.perf_counter()

    async def one(index: int) -> None:
        nonlocal warmed
        sink = received[index]
        async with (
            httpx.AsyncClient(
                base_url=base_url,
                headers={"Authorization": f"Bearer {token}"},
                timeout=httpx.Timeout(seconds, connect=60.0),
                verify=tls,
            ) as client,
            client.stream("GET", f"/api/agent/runs/{run_id}/events") as response,
        ):
            if response.status_code != 200:
                errors.append(f"client {index}: HTTP {response.status_code}")
                return
            async for event, data, seq in _events(response.aiter_raw()):
                sink.append((seq, event, time.perf_counter(), f'"seq {seq} ' in data))
                if len(sink) == 1:
                    warmed += 1
                    if warmed == clients:
                        ready.put((connecting, time.perf_counter(), time.process_time()))
                if event == "end":
                    return

    async def guarded(index: int) -> None:
        try:
            await one(index)
        except Exception as error:
            errors.append(f"client {index}: {type(error).__name__}: {error}")

    async with asyncio.timeout(seconds):
        await asyncio.gather(*(guarded(i) for i in range(clients)))
    return received, errors


async def _events(chunks: AsyncIterator[bytes]) -> AsyncIterator[tuple[str, str, int]]:
    """(event, data, seq) for each server-sent event; comments (heartbeats) skipped. The
    server ends each line with ``\\r\\n``; the blocks are split by hand (cheaper than
    httpx's line iterator, so 200 clients in one process cost less CPU)."""
    buffer = b""
    async for chunk in chunks:
        buffer += chunk
        *blocks, buffer = buffer.replace(b"\r\n", b"\n").split(b"\n\n")
        for block in blocks:
            event, data, seq = "message", [], -1
            for line in block.decode().split("\n"):
                if not line or line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "event":
                    event = value
                elif name == "data":
                    data.append(value)
                elif name == "id":
                    seq = int(value)
            if event == "init":
                continue  # the stored input, sent first on a fresh stream; not in the log
            if data or event != "message":
                yield event, "\n".join(data), seq


# --------------------------------------------------------------------------- the run


@dataclass
class Appended:
    first_seq: int
    last_seq: int
    sent: float  # perf_counter before the append
    done: float  # after it (commit, then NOTIFY) returned


def database_counts(url: str) -> dict[str, int]:
    """Cumulative statistics: transactions committed in this database, calls of yuxi's
    PL/pgSQL functions (SQL functions that are inlined, such as run_events_after, are not
    counted) and scans of run_events (each events_after or end-event read is one)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT 'transactions', xact_commit FROM pg_stat_database"
            "  WHERE datname = current_database()"
            " UNION ALL SELECT funcname, calls FROM pg_stat_user_functions"
            "  WHERE schemaname = 'yuxi'"
            " UNION ALL SELECT 'run_events scans', seq_scan + coalesce(idx_scan, 0)"
            "  FROM pg_stat_user_tables WHERE schemaname = 'yuxi' AND relname = 'run_events'"
        ).fetchall()
    return {str(name): int(count or 0) for name, count in rows}


def track_functions(url: str) -> bool:
    """Counts function calls in this database's new sessions (needs a superuser)."""
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET track_functions = 'all'").format(
                    sql.Identifier(str(conn.info.dbname))
                )
            )
        except psycopg.errors.InsufficientPrivilege:
            return False
    return True


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    url = database.url
    uid, token = seed_api_owner(url)
    tracked = track_functions(url) if args.stats_wait > 0 else False
    conn = await connect(url)
    cur = await conn.execute(
        "SELECT (yuxi.thread_create(%s, %s, NULL, 'fan-out')).thread_id", (uid, AGENT)
    )
    row = await cur.fetchone()
    assert row is not None
    info = await request_submit(conn, uid=uid, thread_id=row[0], query="stream to everyone")
    assert info.run_id is not None
    claimed = await run_claim(conn, info.run_id, worker="bench", lease_seconds=LEASE_SECONDS)
    run_id, lease = claimed.run_id, claimed.lease_token
    settle(url)
    scratch = tempfile.TemporaryDirectory(prefix="yuxi-bench-gc-")
    gc_file = Path(scratch.name) / "gc" if args.api_gc else None
    try:
        with api_process(url, profile_to=args.profile_api, gc_to=gc_file) as api:
            log(f"API: {api.describe()}")
            status = await stream(url, api, conn, run_id, lease, token, tracked, args)
        if gc_file is not None:
            seconds, collections = gc_file.read_text().split()
            print(
                f"  API garbage collection: {float(seconds):.2f} s in {collections}"
                f" collections over the API process's life"
            )
    finally:
        await conn.close()
        scratch.cleanup()
    if args.profile_api:
        print(f"\nAPI process under cProfile ({args.profile_api}), top 25 by own time:")
        pstats.Stats(str(args.profile_api)).sort_stats("tottime").print_stats(25)
    return status


async def stream(
    url: str,
    api: ApiProcess,
    conn: psycopg.AsyncConnection[Any],
    run_id: UUID,
    lease: UUID,
    token: str,
    tracked: bool,
    args: argparse.Namespace,
) -> int:
    idle = api.sample()
    first = await run_append_events(
        conn, run_id, lease, [RunEvent("metadata", {"text": "seq 1 "})], notify_after_commit=True
    )
    context = multiprocessing.get_context("spawn")
    ready: multiprocessing.Queue[Any] = context.Queue()
    results: multiprocessing.Queue[Any] = context.Queue()
    child = context.Process(
        target=client_process,
        args=(api.base_url, token, str(run_id), args.clients, args.timeout, ready, results),
        daemon=True,
    )
    connect_started = time.perf_counter()
    child.start()
    try:
        connecting, all_warm, client_cpu_warm = await asyncio.to_thread(
            ready.get, True, args.timeout
        )
    except queue.Empty:
        raise RuntimeError("the clients did not all connect in time") from None
    connected = api.sample()
    log(
        f"{args.clients} clients connected and read the first event in"
        f" {all_warm - connecting:.2f} s ({connecting - connect_started:.1f} s to start the"
        " clients' process)"
    )
    if tracked:  # idle sessions report their statistics within about 10 s
        await asyncio.sleep(args.stats_wait)
    calls_before = database_counts(url) if tracked else {}
    before = api.sample()
    server_before = server_cpu_seconds(url)
    own_before = time.process_time()
    peak_rss = 0
    sampling = True

    async def sample_rss() -> None:
        nonlocal peak_rss
        while sampling:
            peak_rss = max(peak_rss, api.sample().rss_bytes)
            await asyncio.sleep(0.02)

    sampler = asyncio.create_task(sample_rss())
    appended: list[Appended] = []
    seq = first
    stream_started = time.perf_counter()
    for start in range(0, args.events, args.batch):
        count = min(args.batch, args.events - start)
        events = [
            RunEvent(
                "messages",
                {"chunks": [{"message_id": "m1", "text": f"seq {seq + 1 + k} {FILLER}"}]},
            )
            for k in range(count)
        ]
        sent = time.perf_counter()
        last = await run_append_events(conn, run_id, lease, events, notify_after_commit=True)
        appended.append(Appended(seq + 1, last, sent, time.perf_counter()))
        seq = last
        await asyncio.sleep(args.gap_ms / 1000)
    finished = await run_finish(
        conn,
        run_id,
        lease,
        status="completed",
        messages=[OutputMessage(role="assistant", content="done")],
        notify_after_commit=True,
    )
    end_done = time.perf_counter()
    try:
        received, errors, client_cpu_end = await asyncio.to_thread(results.get, True, args.timeout)
    except queue.Empty:
        raise RuntimeError("the clients did not finish in time") from None
    after = api.sample()
    server_cpu = server_cpu_seconds(url) - server_before
    own_cpu = time.process_time() - own_before
    sampling = False
    await sampler
    client_cpu = client_cpu_end - client_cpu_warm
    await asyncio.to_thread(child.join, 30)
    if tracked:
        await asyncio.sleep(args.stats_wait)
    calls = database_counts(url) if tracked else {}

    end_seq = finished.last_event_seq
    problems = list(errors)
    problems += check(received, first, end_seq, args.clients)
    done_at = {s: a.done for a in appended for s in range(a.first_seq, a.last_seq + 1)}
    sent_at = {s: a.sent for a in appended for s in range(a.first_seq, a.last_seq + 1)}
    latency = [t - done_at[s] for sink in received for s, e, t, _ in sink if s in done_at]
    from_sent = [t - sent_at[s] for sink in received for s, e, t, _ in sink if s in sent_at]
    end_reads = [t for sink in received for s, e, t, _ in sink if e == "end"]
    end_latency = [t - end_done for t in end_reads]
    last_end = max(end_reads) if end_reads else float("nan")
    appends_ms = [(a.done - a.sent) * 1000 for a in appended]

    print_table(
        f"{args.clients} SSE clients on one run: {args.events} messages events in"
        f" {len(appended)} appends of {args.batch}, {args.gap_ms:g} ms apart, then end (ms)",
        ["interval", "p50", "p90", "p99", "max", "min"],
        [
            ["append returned → client read it", *_spread(latency)],
            ["append sent → client read it", *_spread(from_sent)],
            ["run_finish returned → client read end", *_spread(end_latency)],
            ["one append (commit + NOTIFY)", *_spread([a / 1000 for a in appends_ms])],
        ],
    )
    streamed = end_done - stream_started
    print(
        f"  end → last client: {(last_end - end_done) * 1000:.1f} ms after run_finish returned"
        f" ({(last_end - appended[-1].done) * 1000:.1f} ms after the last messages append"
        f" returned); the stream took {streamed:.2f} s from the first append to run_finish"
    )
    window = last_end - stream_started
    cpu = (after.user_seconds - before.user_seconds, after.sys_seconds - before.sys_seconds)
    connect_cpu = connected.cpu_seconds - idle.cpu_seconds
    deliveries = args.clients * (args.events + 1)
    print_table(
        "API process (yuxi, from /proc)",
        ["phase", "cpu user s", "cpu sys s", "cpu % of one core", "waited for a cpu s", "RSS MiB"],
        [
            ["idle, before the clients", "-", "-", "-", "-", mib(idle.rss_bytes)],
            [
                f"{args.clients} clients connect",
                f"{connected.user_seconds - idle.user_seconds:.2f}",
                f"{connected.sys_seconds - idle.sys_seconds:.2f}",
                f"{connect_cpu / (all_warm - connecting) * 100:.0f}",
                f"{connected.wait_seconds - idle.wait_seconds:.2f}",
                mib(connected.rss_bytes),
            ],
            [
                f"stream ({window:.2f} s to the last end)",
                f"{cpu[0]:.2f}",
                f"{cpu[1]:.2f}",
                f"{sum(cpu) / window * 100:.0f}",
                f"{after.wait_seconds - before.wait_seconds:.2f}",
                f"{mib(peak_rss)} (peak sampled)",
            ],
            [
                "after",
                "-",
                "-",
                "-",
                "-",
                f"{mib(after.rss_bytes)} (peak {mib(after.hwm_bytes)})",
            ],
        ],
    )
    print(
        f"  stream CPU per delivered event: API {sum(cpu) / deliveries * 1e6:.0f} µs,"
        f" PostgreSQL {server_cpu / deliveries * 1e6:.0f} µs, the clients' process"
        f" {client_cpu / deliveries * 1e6:.0f} µs; in all over the stream: API {sum(cpu):.2f} s,"
        f" PostgreSQL {server_cpu:.2f} s, clients {client_cpu:.2f} s, this process"
        f" {own_cpu:.2f} s"
    )
    if tracked:
        delta = {name: calls.get(name, 0) - calls_before.get(name, 0) for name in COUNTED}
        wakeups = len(appended) + 1
        per = args.clients * wakeups
        print(
            f"  database work during the stream ({wakeups} notifications × {args.clients}"
            " clients; transactions include the benchmark's own 2 per append): "
            + ", ".join(
                f"{name} {count:,} ({count / per:.2f} per client per notification)"
                for name, count in delta.items()
            )
        )
    for problem in problems[:20]:
        print(f"  CHECK FAILED: {problem}")
    ok = not problems
    print(
        f"\nNo target. Deliveries: {deliveries:,} events to {args.clients} clients, each"
        f" exactly once and in order, one end each: {verdict(ok)} (checks);"
        f" p50/p99 {percentile(latency, 0.5) * 1000:.1f}/{percentile(latency, 0.99) * 1000:.1f}"
        f" ms, end → last client {(last_end - end_done) * 1000:.0f} ms"
    )
    return 0 if ok else 1


def _spread(seconds: list[float]) -> list[str]:
    if not seconds:
        return ["-"] * 5
    return [
        f"{percentile(seconds, fraction) * 1000:.1f}" for fraction in (0.5, 0.9, 0.99, 1.0, 0.0)
    ]


def check(received: list[Received], first: int, end_seq: int, clients: int) -> list[str]:
    """Every client: seqs first..end_seq once each, in order, own payloads, one end, last."""
    problems = []
    if len(received) != clients:
        problems.append(f"{len(received)} clients reported, {clients} expected")
    expected = list(range(first, end_seq + 1))
    for index, sink in enumerate(received):
        seqs = [s for s, _, _, _ in sink]
        ends = [s for s, e, _, _ in sink if e == "end"]
        if seqs != expected:
            missing = sorted(set(expected) - set(seqs))
            dupes = len(seqs) - len(set(seqs))
            problems.append(
                f"client {index}: {len(seqs)} events, {len(missing)} missing"
                f" (first {missing[:3]}), {dupes} duplicated, in order: {seqs == sorted(seqs)}"
            )
        if ends != [end_seq]:
            problems.append(f"client {index}: end events {ends}, expected one at {end_seq}")
        wrong = [s for s, e, _, own in sink if e == "messages" and not own]
        if wrong:
            problems.append(f"client {index}: payloads of other events at seqs {wrong[:3]}")
    return problems


def main(argv: list[str] | None = None) -> int:
    return run_benchmark(
        "sse", "sse_fanout (GET /api/agent/runs/{id}/events)", parse_args(argv), measure
    )


if __name__ == "__main__":
    with suppress(RuntimeError):
        multiprocessing.set_start_method("spawn")
    raise SystemExit(main())
