"""Deep backlog: the dispatch rate with 200 requests queued on every thread, against the
same work on threads whose queue is short.

Build (timed and reported): --threads conversations, each sent 1 + --depth requests through
``yuxi.request_submit`` in a few big transactions (the first dispatches, the rest queue),
and as many "shallow" conversations sent 1 + --passes requests, so that every finish in the
measurement still has a next request to dispatch but never more than --passes queued.

Measurement: --passes passes over each set, alternating deep and shallow (ABBA). In a
pass every thread's active run is looked up (``conversations.last_run_id``), claimed
(``run_claim``) and completed (``run_finish``, which dispatches the next queue head in
the same transaction) once, by --concurrency workers on their own connections.

Checks: FIFO on every measured thread (the dispatched requests are exactly the oldest by
(created_at, id), in dispatch order), a sampled thread printed, and the queue counts.
Also reported: the latency of one more submit onto a deep vs a shallow backlog.

Target: deep rate ≥ 0.8 × shallow rate.

    uv run python -m tests.bench.backlog [--threads 1000] [--depth 200] [--passes 4]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any
from uuid import UUID

import psycopg
from psycopg import AsyncConnection

from tests.bench.harness import (
    BenchDatabase,
    Measured,
    Worker,
    connect,
    create_threads,
    log,
    percentile,
    print_table,
    run_benchmark,
    run_workers,
    seed_owner,
    settle,
    verdict,
)
from yuxi.queue.requests import request_submit
from yuxi.queue.runs import OutputMessage, run_claim, run_finish

TARGET_RATIO = 0.8
LEASE_SECONDS = 600.0
REPLY = [OutputMessage(role="assistant", content="done")]
BUILD_CHUNK = 10  # threads per build transaction

BUILD = """
SELECT count(yuxi.request_submit(%s, t.thread_id, 'backlog message'))
FROM unnest(%s::uuid[]) AS t(thread_id), generate_series(0, %s)
"""
ACTIVE_RUN = "SELECT last_run_id FROM yuxi.conversations WHERE thread_id = %s"
FIFO = """
WITH ranked AS (
    SELECT q.thread_id, q.status, r.created_at AS run_seq,
           row_number() OVER (PARTITION BY q.thread_id ORDER BY q.created_at, q.id) AS queue_rank
    FROM yuxi.agent_run_requests q
    LEFT JOIN yuxi.agent_runs r ON r.run_id = q.dispatched_run_id
    WHERE q.thread_id = ANY(%s)
), dispatched AS (
    SELECT queue_rank,
           row_number() OVER (PARTITION BY thread_id ORDER BY run_seq) AS dispatch_rank
    FROM ranked WHERE status = 'dispatched'
)
SELECT count(*) FILTER (WHERE queue_rank <> dispatch_rank), count(*) FROM dispatched
"""
SAMPLE = """
SELECT q.id, q.created_at, q.status, r.created_at
FROM yuxi.agent_run_requests q
LEFT JOIN yuxi.agent_runs r ON r.run_id = q.dispatched_run_id
WHERE q.thread_id = %s
ORDER BY r.created_at NULLS LAST, q.created_at, q.id
"""
COUNTS = """
SELECT count(*) FILTER (WHERE status = 'queued'), count(*) FILTER (WHERE status = 'dispatched')
FROM yuxi.agent_run_requests WHERE thread_id = ANY(%s)
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.backlog",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--threads", type=int, default=1000, help="conversations per set")
    parser.add_argument("--depth", type=int, default=200, help="requests queued per deep thread")
    parser.add_argument("--passes", type=int, default=4, help="dispatches measured per thread")
    parser.add_argument("--concurrency", type=int, default=8, help="workers, one connection each")
    parser.add_argument(
        "--build-connections", type=int, default=2, help="connections building the backlog"
    )
    parser.add_argument(
        "--submit-samples", type=int, default=200, help="extra submits timed per set (0: skip)"
    )
    args = parser.parse_args(argv)
    if args.passes > args.depth:
        parser.error("--passes must not exceed --depth")
    return args


async def build(url: str, uid: UUID, threads: list[UUID], queued: int, connections: int) -> float:
    """Sends every thread 1 + ``queued`` requests; returns the seconds it took."""
    chunks: asyncio.Queue[list[UUID]] = asyncio.Queue()
    for start in range(0, len(threads), BUILD_CHUNK):
        chunks.put_nowait(threads[start : start + BUILD_CHUNK])

    async def builder() -> None:
        conn = await connect(url)
        try:
            while not chunks.empty():
                chunk = chunks.get_nowait()
                await conn.execute(BUILD, (uid, chunk, queued))
        finally:
            await conn.close()

    started = time.perf_counter()
    await asyncio.gather(*(builder() for _ in range(connections)))
    return time.perf_counter() - started


def dispatcher(threads: list[UUID], concurrency: int) -> Worker:
    """A worker that claims and completes the active run of each of its threads once."""

    async def work(conn: AsyncConnection[Any], index: int, deadline: float) -> int:
        done = 0
        for thread in threads[index::concurrency]:
            cur = await conn.execute(ACTIVE_RUN, (thread,))
            row = await cur.fetchone()
            assert row is not None and row[0] is not None, f"thread {thread} has no run"
            claimed = await run_claim(conn, row[0], worker=f"w{index}", lease_seconds=LEASE_SECONDS)
            await run_finish(
                conn, claimed.run_id, claimed.lease_token, status="completed", messages=REPLY
            )
            done += 1
        return done

    return work


def check_fifo(url: str, threads: list[UUID]) -> tuple[int, int]:
    """(dispatched requests out of FIFO order, dispatched requests checked)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(FIFO, (threads,)).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def show_sample(url: str, thread: UUID, shown: int = 3) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(SAMPLE, (thread,)).fetchall()
    dispatched = [row for row in rows if row[2] == "dispatched"]
    queued = [row for row in rows if row[2] == "queued"]
    in_order = dispatched == sorted(dispatched, key=lambda row: (row[1], row[0]))
    before_queue = (
        not queued
        or not dispatched
        or (dispatched[-1][1], dispatched[-1][0]) < min((row[1], row[0]) for row in queued)
    )
    print(f"\nFIFO sample, thread {thread}:")
    for req_id, created, _, dispatched_at in dispatched:
        print(
            f"  run of {dispatched_at:%H:%M:%S.%f} <- request #{req_id:<8}"
            f" created {created:%H:%M:%S.%f}"
        )
    for req_id, created, _, _ in queued[:shown]:
        print(f"  (queued)                <- request #{req_id:<8} created {created:%H:%M:%S.%f}")
    if len(queued) > shown:
        print(f"  ... {len(queued) - shown} more queued")
    print(
        f"  dispatch order follows (created_at, id): {in_order};"
        f" every queued request is younger than every dispatched one: {before_queue}"
    )


async def submit_latency(
    url: str, uid: UUID, deep: list[UUID], shallow: list[UUID], samples: int
) -> dict[str, list[float]]:
    """One more submit onto a thread of each set, alternating; seconds per submit."""
    spent: dict[str, list[float]] = {"deep": [], "shallow": []}
    conn = await connect(url)
    try:
        for index in range(samples):
            for name, threads in (("deep", deep), ("shallow", shallow)):
                thread = threads[index % len(threads)]
                started = time.perf_counter()
                info = await request_submit(conn, uid=uid, thread_id=thread, query="one more")
                spent[name].append(time.perf_counter() - started)
                assert info.status == "queued", info
    finally:
        await conn.close()
    return spent


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    url = database.url
    uid = seed_owner(url)
    deep = create_threads(url, uid, args.threads)
    shallow = create_threads(url, uid, args.threads)

    deep_build = await build(url, uid, deep, args.depth, args.build_connections)
    deep_submits = args.threads * (args.depth + 1)
    log(
        f"deep backlog: {deep_submits:,} submits in {deep_build:.1f} s"
        f" ({deep_submits / deep_build:,.0f}/s on {args.build_connections} connections)"
    )
    shallow_build = await build(url, uid, shallow, args.passes, args.build_connections)
    log(f"shallow backlog: {args.threads * (args.passes + 1):,} submits in {shallow_build:.1f} s")

    runs: dict[str, list[Measured]] = {"deep": [], "shallow": []}
    sets = {"deep": deep, "shallow": shallow}
    for number in range(args.passes):
        order = ("deep", "shallow") if number % 2 == 0 else ("shallow", "deep")
        for name in order:
            settle(url)
            worker = dispatcher(sets[name], args.concurrency)
            result = await run_workers(url, name, args.concurrency, float("inf"), worker)
            log(f"pass {number + 1}: {name}: {result.rate:,.0f} dispatches/s")
            runs[name].append(result)
    totals = {name: sum(results[1:], results[0]) for name, results in runs.items()}

    problems = []
    for name, queued_left in (("deep", args.depth - args.passes), ("shallow", 0)):
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(COUNTS, (sets[name],)).fetchone()
        expected = (args.threads * queued_left, args.threads * (args.passes + 1))
        if row is None or tuple(row) != expected:
            problems.append(f"{name}: (queued, dispatched) = {row}, expected {expected}")
        misordered, checked = check_fifo(url, sets[name])
        log(f"FIFO {name}: {checked:,} dispatched requests checked, {misordered} out of order")
        if misordered or checked != expected[1]:
            problems.append(f"{name}: {misordered} of {checked} dispatches out of FIFO order")
    show_sample(url, deep[len(deep) // 2])

    shallow_rate = totals["shallow"].rate
    print_table(
        f"Dispatches/s, {args.passes} passes x {args.threads:,} threads per set,"
        f" {args.concurrency} connections (lookup + claim + finish per dispatch)",
        [
            "backlog",
            "queued/thread",
            "dispatches",
            "per s",
            "per pass",
            "server cpu ms",
            "client cpu ms",
            "vs shallow",
        ],
        [
            [
                name,
                f"{args.depth}..{args.depth - args.passes + 1}"
                if name == "deep"
                else f"{args.passes}..1",
                f"{total.items:,}",
                f"{total.rate:,.0f}",
                " / ".join(f"{r.rate:,.0f}" for r in runs[name]),
                f"{total.server_ms_per_item:.2f}",
                f"{total.client_ms_per_item:.2f}",
                f"{total.rate / shallow_rate:.2f}" if shallow_rate else "-",
            ]
            for name, total in totals.items()
        ],
    )
    print(
        "  server/client cpu ms: CPU per dispatch of the PostgreSQL processes (when local)"
        " and of this process"
    )
    print(
        f"  build: {deep_submits:,} submits for the deep set in {deep_build:.1f} s"
        f" ({deep_submits / deep_build:,.0f} submits/s)"
    )

    if args.submit_samples:
        spent = await submit_latency(url, uid, deep, shallow, args.submit_samples)
        print_table(
            f"One more submit onto a busy thread ({args.submit_samples} each, one connection)",
            ["backlog", "mean ms", "p50 ms", "p99 ms"],
            [
                [
                    name,
                    f"{statistics.mean(values) * 1000:.2f}",
                    f"{percentile(values, 0.5) * 1000:.2f}",
                    f"{percentile(values, 0.99) * 1000:.2f}",
                ]
                for name, values in spent.items()
            ],
        )

    for problem in problems:
        print(f"  CHECK FAILED: {problem}")
    ratio = totals["deep"].rate / shallow_rate if shallow_rate else 0.0
    ok = ratio >= TARGET_RATIO and not problems
    print(f"\nTarget: deep ≥ 0.8 x shallow. Measured {ratio:.2f}x, FIFO held: {verdict(ok)}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    return run_benchmark(
        "backlog", "backlog (dispatch from a deep queue)", parse_args(argv), measure
    )


if __name__ == "__main__":
    raise SystemExit(main())
