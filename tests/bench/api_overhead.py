"""API overhead: submits per second over HTTP against ``request_submit`` called directly.

Both sides submit one message to an idle conversation of its own (pre-created, each used
once), so every submit dispatches a run and defers its delivery job; no worker runs.

- ``http``: the API as a process of its own (``uv run yuxi api`` on a free port, default
  pool of 10 connections); --concurrency client tasks in this process, each with an
  httpx client and keep-alive connection of its own, send ``POST /api/agent/runs``
  back to back (bearer token; the API authenticates, then calls ``request_submit``) and
  check each answer is 202 with a dispatched run.
- ``direct``: --concurrency connections in this process, each calling ``request_submit``
  back to back.

Measured side by side on one database, alternating for --rounds (ABBA), --seconds each.
Before that (--profile-items) submits go one at a time, alternating sides, to show the
latency and CPU a single submit costs each way. CPU per submit: of the API process (from
/proc), of the PostgreSQL server (when local) and of this process (the HTTP clients, or
the direct callers).

No target: the ratio http/direct is reported.

    uv run python -m tests.bench.api_overhead [--seconds 6] [--concurrency 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import psycopg
from psycopg import AsyncConnection

from tests.bench.api_process import ApiProcess, add_api_diagnostics, api_process, seed_api_owner
from tests.bench.harness import (
    BenchDatabase,
    connect,
    create_threads,
    log,
    percentile,
    print_table,
    run_benchmark,
    server_cpu_seconds,
    settle,
    verdict,
)
from yuxi.queue.requests import request_submit

QUERY = "hello"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.api_overhead",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seconds", type=float, default=6.0, help="window per variant and round")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent submitters")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of both sides")
    parser.add_argument(
        "--window-threads",
        type=int,
        default=15_000,
        help="fresh conversations made ready (untimed) before each window, one per submit",
    )
    add_api_diagnostics(parser, profile=False)
    parser.add_argument(
        "--profile-items", type=int, default=300, help="submits per side one at a time (0: skip)"
    )
    return parser.parse_args(argv)


@dataclass
class Side:
    label: str
    latencies: list[float] = field(default_factory=list)
    rounds: list[float] = field(default_factory=list)  # submits/s per round
    items: int = 0
    seconds: float = 0.0
    api_cpu: float = 0.0
    api_wait: float = 0.0  # the API process runnable but waiting for a CPU
    server_cpu: float = 0.0
    client_cpu: float = 0.0

    @property
    def rate(self) -> float:
        return self.items / self.seconds if self.seconds else 0.0

    def per_item_ms(self, cpu: float) -> str:
        return f"{cpu / self.items * 1000:.2f}" if self.items else "-"


class Threads:
    """Each conversation is used once. Topped up (untimed) before each window; running
    out inside one is an error (raise --window-threads)."""

    def __init__(self, url: str, uid: UUID) -> None:
        self.url = url
        self.uid = uid
        self.pending: list[UUID] = []
        self.used = 0

    def top_up(self, count: int) -> None:
        if len(self.pending) < count:
            self.pending += create_threads(self.url, self.uid, count - len(self.pending))

    def next(self) -> UUID:
        if not self.pending:
            raise RuntimeError("the pre-created conversations ran out: raise --window-threads")
        self.used += 1
        return self.pending.pop()


def http_client(api: ApiProcess, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=api.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60.0
    )


async def http_submit(client: httpx.AsyncClient, thread: UUID) -> None:
    response = await client.post("/api/agent/runs", json={"thread_id": str(thread), "query": QUERY})
    if response.status_code != 202:
        raise RuntimeError(f"POST /api/agent/runs: {response.status_code} {response.text[:300]}")
    body = response.json()
    if body["status"] != "dispatched" or body["run_id"] is None:
        raise RuntimeError(f"the submit did not dispatch: {body}")


async def direct_submit(conn: AsyncConnection[Any], uid: UUID, thread: UUID) -> None:
    info = await request_submit(conn, uid=uid, thread_id=thread, query=QUERY)
    if info.status != "dispatched" or info.run_id is None:
        raise RuntimeError(f"the submit did not dispatch: {info}")


async def timed_window(
    url: str, api: ApiProcess, side: Side, concurrency: int, seconds: float, work: Any
) -> None:
    """Runs ``work(index, deadline, latencies)`` on ``concurrency`` tasks; each returns
    how many submits it finished before the deadline."""
    api_before = api.sample()
    server = server_cpu_seconds(url)
    client = time.process_time()
    started = time.perf_counter()
    counts = await asyncio.gather(
        *(work(index, started + seconds, side.latencies) for index in range(concurrency))
    )
    elapsed = time.perf_counter() - started
    side.client_cpu += time.process_time() - client
    side.server_cpu += server_cpu_seconds(url) - server
    api_after = api.sample()
    side.api_cpu += api_after.cpu_seconds - api_before.cpu_seconds
    side.api_wait += api_after.wait_seconds - api_before.wait_seconds
    side.items += sum(counts)
    side.seconds += elapsed
    side.rounds.append(sum(counts) / elapsed)


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    url = database.url
    uid, token = seed_api_owner(url)
    threads = Threads(url, uid)
    started = time.perf_counter()
    threads.top_up(args.window_threads)
    log(f"created {args.window_threads:,} conversations in {time.perf_counter() - started:.1f} s")
    settle(url)
    scratch = tempfile.TemporaryDirectory(prefix="yuxi-bench-gc-")
    gc_file = Path(scratch.name) / "gc" if args.api_gc else None
    with api_process(url, gc_to=gc_file) as api:
        log(f"API: {api.describe()}")
        if args.profile_items:
            await profile(url, api, uid, token, threads, args.profile_items)
        http, direct = Side("http"), Side("direct")
        clients = [http_client(api, token) for _ in range(args.concurrency)]
        conns = [await connect(url) for _ in range(args.concurrency)]

        async def http_work(index: int, deadline: float, latencies: list[float]) -> int:
            done = 0
            while time.perf_counter() < deadline:
                sent = time.perf_counter()
                await http_submit(clients[index], threads.next())
                latencies.append(time.perf_counter() - sent)
                done += 1
            return done

        async def direct_work(index: int, deadline: float, latencies: list[float]) -> int:
            done = 0
            while time.perf_counter() < deadline:
                sent = time.perf_counter()
                await direct_submit(conns[index], uid, threads.next())
                latencies.append(time.perf_counter() - sent)
                done += 1
            return done

        sides = [(http, http_work), (direct, direct_work)]
        try:
            for client in clients:  # open each keep-alive connection before timing
                await client.get("/api/system/health")
            for round_no in range(args.rounds):
                for side, work in sides if round_no % 2 == 0 else sides[::-1]:
                    threads.top_up(args.window_threads)
                    settle(url)
                    await timed_window(url, api, side, args.concurrency, args.seconds, work)
                    log(f"round {round_no + 1}: {side.label}: {side.rounds[-1]:,.0f} submits/s")
        finally:
            for client in clients:
                await client.aclose()
            for conn in conns:
                await conn.close()
    gc_seconds = float(gc_file.read_text().split()[0]) if gc_file is not None else None
    scratch.cleanup()

    print_table(
        f"Submits/s over {args.rounds} x {args.seconds:g} s, {args.concurrency} concurrent"
        " submitters, each submit on a fresh conversation",
        [
            "side",
            "submits",
            "submits/s",
            "per round",
            "p50 ms",
            "p99 ms",
            "API cpu ms/submit",
            "API waited ms/submit",
            "server cpu ms/submit",
            "client cpu ms/submit",
            "vs direct",
        ],
        [
            [
                side.label,
                f"{side.items:,}",
                f"{side.rate:,.0f}",
                " / ".join(f"{r:,.0f}" for r in side.rounds),
                f"{percentile(side.latencies, 0.5) * 1000:.2f}",
                f"{percentile(side.latencies, 0.99) * 1000:.2f}",
                side.per_item_ms(side.api_cpu) if side is http else "-",
                side.per_item_ms(side.api_wait) if side is http else "-",
                side.per_item_ms(side.server_cpu),
                side.per_item_ms(side.client_cpu),
                f"{side.rate / direct.rate:.2f}" if direct.rate else "-",
            ]
            for side in (http, direct)
        ],
    )
    if gc_seconds is not None:
        print(
            f"  API garbage collection: {gc_seconds:.2f} s over the API process's life,"
            f" {gc_seconds / (http.items + args.profile_items + 10) * 1000:.3f} ms per HTTP submit"
        )
    problems = check(url, threads.used)
    for problem in problems:
        print(f"  CHECK FAILED: {problem}")
    ratio = http.rate / direct.rate if direct.rate else 0.0
    print(
        f"\nNo target. http/direct = {ratio:.2f}x ({http.rate:,.0f} vs {direct.rate:,.0f}"
        f" submits/s); checks: {verdict(not problems)}"
    )
    return 0 if not problems else 1


async def profile(
    url: str, api: ApiProcess, uid: UUID, token: str, threads: Threads, count: int
) -> None:
    """One submit at a time, alternating sides: latency and CPU of a single submit."""
    sides = {"http": Side("http"), "direct": Side("direct")}
    client = http_client(api, token)
    conn = await connect(url)
    try:
        await client.get("/api/system/health")
        for _ in range(10):  # warm-up
            await http_submit(client, threads.next())
            await direct_submit(conn, uid, threads.next())
        for block in range(0, count, 50):
            order = ["http", "direct"] if block % 100 == 0 else ["direct", "http"]
            for label in order:
                side = sides[label]
                api_before = api.sample()
                server = server_cpu_seconds(url)
                own = time.process_time()
                for _ in range(min(50, count - block)):
                    sent = time.perf_counter()
                    if label == "http":
                        await http_submit(client, threads.next())
                    else:
                        await direct_submit(conn, uid, threads.next())
                    side.latencies.append(time.perf_counter() - sent)
                    side.items += 1
                side.client_cpu += time.process_time() - own
                side.server_cpu += server_cpu_seconds(url) - server
                api_after = api.sample()
                side.api_cpu += api_after.cpu_seconds - api_before.cpu_seconds
                side.api_wait += api_after.wait_seconds - api_before.wait_seconds
    finally:
        await client.aclose()
        await conn.close()
    http, direct = sides["http"], sides["direct"]
    print_table(
        f"One submit at a time, {count} per side (ms)",
        [
            "side",
            "mean",
            "p50",
            "p99",
            "API cpu",
            "API waited for a cpu",
            "server cpu",
            "client cpu",
        ],
        [
            [
                side.label,
                f"{statistics.mean(side.latencies) * 1000:.2f}",
                f"{percentile(side.latencies, 0.5) * 1000:.2f}",
                f"{percentile(side.latencies, 0.99) * 1000:.2f}",
                side.per_item_ms(side.api_cpu) if side is http else "-",
                side.per_item_ms(side.api_wait) if side is http else "-",
                side.per_item_ms(side.server_cpu),
                side.per_item_ms(side.client_cpu),
            ]
            for side in (http, direct)
        ],
    )


def check(url: str, submitted: int) -> list[str]:
    """Every conversation handed out got exactly one dispatched request and pending run
    (a handed-out conversation whose submit was cut by the deadline cannot exist: a
    conversation is taken only when its submit starts, and each submit is awaited)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM yuxi.agent_run_requests WHERE status = 'dispatched'),"
            " (SELECT count(*) FROM yuxi.agent_runs WHERE status = 'pending'),"
            " (SELECT count(*) FROM (SELECT thread_id FROM yuxi.agent_run_requests"
            "   GROUP BY thread_id HAVING count(*) > 1) s)"
        ).fetchone()
    assert row is not None
    dispatched, pending, shared = row
    problems = []
    if dispatched != submitted or pending != submitted:
        problems.append(f"{dispatched} dispatched, {pending} pending; {submitted} submitted")
    if shared:
        problems.append(f"{shared} conversations got more than one request")
    return problems


def main(argv: list[str] | None = None) -> int:
    return run_benchmark(
        "api", "api_overhead (POST /api/agent/runs vs request_submit)", parse_args(argv), measure
    )


if __name__ == "__main__":
    raise SystemExit(main())
