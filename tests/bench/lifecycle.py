"""Lifecycle throughput: submit → claim → finish, against a bare SKIP LOCKED queue.

Every item is three transactions on the worker's own autocommit connection:

- yuxi: ``request_submit`` (the thread is idle, so the run is dispatched and its delivery
  job inserted in the same transaction), ``run_claim``, ``run_finish`` (status
  ``completed`` with one assistant message; writes the ``end`` event and, as the worker
  does, notifies listeners from a transaction of its own after commit). No graph runs and
  no procrastinate worker fetches the delivery jobs.
- baseline: ``INSERT`` into a plain table, claim with
  ``UPDATE … WHERE id = (SELECT id … FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING``, then
  ``UPDATE … SET status = 'done'``.

Variants, measured side by side in one run on one database, alternating for --rounds:

- ``baseline``: the bare queue;
- ``yuxi``: each item on a conversation of its own (pre-created; a worker cycles through
  its own slice of the pool only when the pool runs out), so runs never wait for each other;
- ``yuxi-shared``: all workers submit to --shared-threads conversations. A submit to a busy
  thread queues; each worker then claims and finishes whichever run of its thread is
  pending (polling ``agent_runs`` when none is), so each thread executes one run at a time
  and each finish dispatches the next request;
- with --diagnose-notify, ``yuxi, pg_notify a no-op``: the yuxi variant on sessions whose
  search_path resolves ``pg_notify`` to a no-op (see SILENCE_NOTIFY), to show what the
  cluster-wide NOTIFY commit lock costs. Not a supported configuration.

First (--profile-items), items run one at a time on one connection to show the mean
latency of each call and the rows each yuxi item writes. "server/client cpu ms/item" is
the CPU time the PostgreSQL processes (when local, from /proc) and this process spent per
item: a measure that other load on the machine does not skew the way it skews rates.
With --sample-waits, each window also samples pg_stat_activity every 5 ms and prints the
top wait events of each variant (the sampler adds some load of its own).

Target: yuxi ≥ 1/3 of the baseline rate.

    uv run python -m tests.bench.lifecycle [--seconds 6] [--concurrency 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import psycopg
from psycopg import AsyncConnection

from tests.bench.harness import (
    BenchDatabase,
    Measured,
    WaitSampler,
    Worker,
    connect,
    create_threads,
    log,
    print_table,
    run_benchmark,
    run_workers,
    seed_owner,
    server_cpu_seconds,
    settle,
    table_delta,
    table_writes,
    verdict,
)
from yuxi.queue.errors import RunNotClaimable
from yuxi.queue.requests import request_submit
from yuxi.queue.runs import OutputMessage, run_claim, run_finish

TARGET_RATIO = 1 / 3
LEASE_SECONDS = 600.0
REPLY = [OutputMessage(role="assistant", content="done")]

# The baseline queue, and the no-op pg_notify that --diagnose-notify puts on the path.
BENCH_SCHEMA = """
CREATE SCHEMA bench;
CREATE TABLE bench.jobs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payload     text NOT NULL,
    status      text NOT NULL DEFAULT 'queued',
    worker      text,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    claimed_at  timestamptz,
    done_at     timestamptz
);
CREATE INDEX jobs_queued_idx ON bench.jobs (id) WHERE status = 'queued';
CREATE FUNCTION bench.pg_notify(text, text) RETURNS void LANGUAGE sql AS 'SELECT NULL::void';
"""
BASELINE_SUBMIT = "INSERT INTO bench.jobs (payload) VALUES (%s) RETURNING id"
BASELINE_CLAIM = """
UPDATE bench.jobs SET status = 'running', worker = %s, claimed_at = clock_timestamp()
WHERE id = (SELECT id FROM bench.jobs WHERE status = 'queued'
            ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1)
RETURNING id
"""
BASELINE_FINISH = "UPDATE bench.jobs SET status = 'done', done_at = clock_timestamp() WHERE id = %s"
# --diagnose-notify: a session whose search_path puts bench.pg_notify before pg_catalog sends
# no notifications (yuxi's and procrastinate's functions call pg_notify unqualified), so
# its commits skip the cluster-wide lock that serialises notifying commits.
SILENCE_NOTIFY = "SET search_path = bench, pg_catalog, public"
PENDING_RUN = "SELECT run_id FROM yuxi.agent_runs WHERE thread_id = %s AND status = 'pending'"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.lifecycle",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seconds", type=float, default=6.0, help="window per variant and round")
    parser.add_argument("--concurrency", type=int, default=8, help="workers, one connection each")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of all variants")
    parser.add_argument(
        "--thread-pool", type=int, default=20_000, help="conversations pre-created for yuxi"
    )
    parser.add_argument(
        "--shared-threads",
        type=int,
        default=2,
        help="conversations shared by all workers in yuxi-shared (0: skip the variant)",
    )
    parser.add_argument(
        "--diagnose-notify",
        action="store_true",
        help="add a diagnostic yuxi variant whose sessions resolve pg_notify to a no-op",
    )
    parser.add_argument(
        "--sample-waits",
        action="store_true",
        help="sample pg_stat_activity during each window and print the top wait events",
    )
    parser.add_argument(
        "--profile-items",
        type=int,
        default=500,
        help="items run one at a time on one connection first, call by call (0: skip)",
    )
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Variant:
    label: str
    worker: Worker
    setup: tuple[str, ...] = ()


async def baseline_worker(conn: AsyncConnection[Any], index: int, deadline: float) -> int:
    done = 0
    name = f"base-{index}"
    while time.perf_counter() < deadline:
        await conn.execute(BASELINE_SUBMIT, ("hello",))
        cur = await conn.execute(BASELINE_CLAIM, (name,))
        row = await cur.fetchone()
        if row is None:  # every queued item was taken by the other workers
            continue
        await conn.execute(BASELINE_FINISH, (row[0],))
        done += 1
    return done


@dataclass
class YuxiWorkers:
    """Worker ``i`` uses conversations ``pool[i::concurrency]`` in turn, so no two items
    in flight share a conversation and each item gets a fresh one while the pool lasts."""

    uid: UUID
    pool: list[UUID]
    concurrency: int
    used: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.used = [0] * self.concurrency

    @property
    def reused(self) -> int:
        return sum(
            max(0, used - len(self.pool[i :: self.concurrency])) for i, used in enumerate(self.used)
        )

    async def __call__(self, conn: AsyncConnection[Any], index: int, deadline: float) -> int:
        own = self.pool[index :: self.concurrency]
        done = 0
        while time.perf_counter() < deadline:
            thread = own[self.used[index] % len(own)]
            self.used[index] += 1
            info = await request_submit(conn, uid=self.uid, thread_id=thread, query="hello")
            if info.run_id is None:
                raise RuntimeError(f"thread {thread} was not idle: {info}")
            claimed = await run_claim(
                conn, info.run_id, worker=f"w{index}", lease_seconds=LEASE_SECONDS
            )
            await run_finish(
                conn,
                claimed.run_id,
                claimed.lease_token,
                status="completed",
                messages=REPLY,
                notify_after_commit=True,  # as the worker does
            )
            done += 1
        return done


@dataclass
class SharedWorkers:
    """Worker ``i`` submits to ``threads[i % len(threads)]``, then claims and completes
    one pending run of that thread (its own, or the one a finish just dispatched)."""

    uid: UUID
    threads: list[UUID]
    polls: int = 0
    empty_polls: int = 0
    lost_claims: int = 0

    async def __call__(self, conn: AsyncConnection[Any], index: int, deadline: float) -> int:
        thread = self.threads[index % len(self.threads)]
        done = 0
        while time.perf_counter() < deadline:
            info = await request_submit(conn, uid=self.uid, thread_id=thread, query="hello")
            if await self._finish_one(conn, index, thread, info.run_id, deadline):
                done += 1
        return done

    async def _finish_one(
        self,
        conn: AsyncConnection[Any],
        index: int,
        thread: UUID,
        run_id: UUID | None,
        deadline: float,
    ) -> bool:
        """Claims and completes one pending run of ``thread``; False at the deadline."""
        while True:
            if run_id is None:
                self.polls += 1
                cur = await conn.execute(PENDING_RUN, (thread,))
                row = await cur.fetchone()
                if row is None:
                    self.empty_polls += 1
                    if time.perf_counter() >= deadline:
                        return False
                    await asyncio.sleep(0.0005)
                    continue
                run_id = row[0]
            try:
                claimed = await run_claim(
                    conn, run_id, worker=f"s{index}", lease_seconds=LEASE_SECONDS
                )
            except RunNotClaimable:
                self.lost_claims += 1
                run_id = None
                continue
            await run_finish(
                conn,
                claimed.run_id,
                claimed.lease_token,
                status="completed",
                messages=REPLY,
                notify_after_commit=True,  # as the worker does
            )
            return True


def check_outcome(url: str, yuxi_items: int, baseline_items: int) -> list[str]:
    """Every counted item really ended as it should; returns what is wrong."""
    problems = []
    with psycopg.connect(url, autocommit=True) as conn:
        completed = conn.execute(
            "SELECT count(*) FROM yuxi.agent_runs WHERE status = 'completed'"
        ).fetchone()
        bad_output = conn.execute(
            "SELECT count(*) FROM yuxi.agent_runs r WHERE r.status = 'completed' AND"
            " (SELECT count(*) FROM yuxi.messages m WHERE m.run_id = r.run_id"
            "  AND m.role = 'assistant') <> 1"
        ).fetchone()
        done = conn.execute("SELECT count(*) FROM bench.jobs WHERE status = 'done'").fetchone()
    if completed is None or completed[0] != yuxi_items:
        problems.append(f"completed runs {completed} != counted yuxi items {yuxi_items}")
    if bad_output is None or bad_output[0] != 0:
        problems.append(f"{bad_output} completed runs without exactly one assistant message")
    if done is None or done[0] != baseline_items:
        problems.append(f"done baseline jobs {done} != counted baseline items {baseline_items}")
    return problems


async def profile(url: str, uid: UUID, threads: list[UUID]) -> None:
    """One connection, one item at a time: where an item's time goes, call by call, and
    how many rows each yuxi item writes (from pg_stat_user_tables)."""
    conn = await connect(url)
    yuxi_calls: list[list[float]] = [[], [], []]
    base_calls: list[list[float]] = [[], [], []]
    before = table_writes(url)
    server_cpu = server_cpu_seconds(url)
    try:
        for thread in threads:
            t0 = time.perf_counter()
            info = await request_submit(conn, uid=uid, thread_id=thread, query="hello")
            assert info.run_id is not None
            t1 = time.perf_counter()
            claimed = await run_claim(conn, info.run_id, worker="p", lease_seconds=LEASE_SECONDS)
            t2 = time.perf_counter()
            await run_finish(
                conn,
                claimed.run_id,
                claimed.lease_token,
                status="completed",
                messages=REPLY,
                notify_after_commit=True,  # as the worker does
            )
            t3 = time.perf_counter()
            for calls, spent in zip(yuxi_calls, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                calls.append(spent)
        yuxi_server = server_cpu_seconds(url) - server_cpu
    finally:
        await conn.close()
    await asyncio.sleep(0.5)  # the closed backend flushes its table statistics on exit
    writes = table_delta(before, table_writes(url))
    conn = await connect(url)
    server_cpu = server_cpu_seconds(url)
    try:
        for _ in threads:
            t0 = time.perf_counter()
            await conn.execute(BASELINE_SUBMIT, ("hello",))
            t1 = time.perf_counter()
            cur = await conn.execute(BASELINE_CLAIM, ("p",))
            row = await cur.fetchone()
            assert row is not None
            t2 = time.perf_counter()
            await conn.execute(BASELINE_FINISH, (row[0],))
            t3 = time.perf_counter()
            for calls, spent in zip(base_calls, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                calls.append(spent)
        base_server = server_cpu_seconds(url) - server_cpu
    finally:
        await conn.close()

    def ms(values: list[float]) -> str:
        return f"{statistics.mean(values) * 1000:.2f}"

    rows = [
        [name, ms(y), ms(b), f"{statistics.mean(y) / statistics.mean(b):.1f}x"]
        for name, y, b in zip(("submit", "claim", "finish"), yuxi_calls, base_calls, strict=True)
    ]
    item_y = [sum(c) for c in zip(*yuxi_calls, strict=True)]
    item_b = [sum(c) for c in zip(*base_calls, strict=True)]
    ratio = statistics.mean(item_y) / statistics.mean(item_b)
    rows.append(["item", ms(item_y), ms(item_b), f"{ratio:.1f}x"])
    count = len(threads)
    server = (yuxi_server / count * 1000, base_server / count * 1000)
    rows.append(
        ["server cpu/item", f"{server[0]:.2f}", f"{server[1]:.2f}", f"{server[0] / server[1]:.1f}x"]
    )
    print_table(
        f"One connection, {len(threads)} items in sequence: mean ms per call",
        ["call", "yuxi", "baseline", "yuxi/baseline"],
        rows,
    )
    print_table(
        f"Rows written per yuxi item (pg_stat_user_tables over the {count} items above)",
        ["table", "inserted", "updated", "of which HOT"],
        [
            [name, f"{ins / count:.2f}", f"{upd / count:.2f}", f"{hot / count:.2f}"]
            for name, (ins, upd, hot) in sorted(writes.items())
        ],
    )


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    url = database.url
    uid = seed_owner(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(BENCH_SCHEMA)
    started = time.perf_counter()
    pool = create_threads(url, uid, args.thread_pool)
    shared = create_threads(url, uid, args.shared_threads) if args.shared_threads else []
    elapsed = time.perf_counter() - started
    log(f"created {len(pool) + len(shared):,} conversations in {elapsed:.1f} s")

    if args.profile_items:
        await profile(url, uid, create_threads(url, uid, args.profile_items))

    own = YuxiWorkers(uid, pool, args.concurrency)
    common = SharedWorkers(uid, shared)
    variants = [Variant("baseline", baseline_worker), Variant("yuxi", own)]
    if shared:
        variants.append(Variant(f"yuxi-shared ({len(shared)} threads)", common))
    if args.diagnose_notify:
        variants.append(Variant("yuxi, pg_notify a no-op", own, (SILENCE_NOTIFY,)))

    runs: dict[str, list[Measured]] = {v.label: [] for v in variants}
    waits = {v.label: WaitSampler(url) for v in variants}
    for round_no in range(args.rounds):
        for variant in variants if round_no % 2 == 0 else variants[::-1]:
            settle(url)
            async with AsyncExitStack() as stack:
                if args.sample_waits:
                    await stack.enter_async_context(waits[variant.label])
                result = await run_workers(
                    url,
                    variant.label,
                    args.concurrency,
                    args.seconds,
                    variant.worker,
                    variant.setup,
                )
            log(f"round {round_no + 1}: {variant.label}: {result.rate:,.0f} items/s")
            runs[variant.label].append(result)
    totals = {label: sum(results[1:], results[0]) for label, results in runs.items()}

    base = totals["baseline"]
    rows = [
        [
            label,
            f"{total.items:,}",
            f"{total.rate:,.0f}",
            " / ".join(f"{r.rate:,.0f}" for r in runs[label]),
            f"{args.concurrency / total.rate * 1000:.2f}" if total.rate else "-",
            f"{total.server_ms_per_item:.2f}",
            f"{total.client_ms_per_item:.2f}",
            f"{total.rate / base.rate:.2f}" if base.rate else "-",
        ]
        for label, total in totals.items()
    ]
    print_table(
        f"Items/s over {args.rounds} x {args.seconds:g} s, {args.concurrency} connections",
        [
            "variant",
            "items",
            "items/s",
            "per round",
            "ms/item/conn",
            "server cpu ms/item",
            "client cpu ms/item",
            "vs baseline",
        ],
        rows,
    )
    print(
        f"  yuxi: {sum(own.used):,} items on {len(pool):,} pre-created conversations"
        + (f" ({own.reused:,} items re-used one)" if own.reused else ", one each")
    )
    if shared:
        print(
            f"  yuxi-shared: {common.polls:,} polls for a pending run"
            f" ({common.empty_polls:,} found none), {common.lost_claims:,} claims lost"
        )

    if args.sample_waits:
        for label, sampler in waits.items():
            print_table(
                f"What the {label} backends were doing (share of pg_stat_activity samples)",
                ["state or wait event", "share"],
                [[name, f"{share:.1%}"] for name, share in sampler.shares()],
            )

    yuxi_items = sum(total.items for label, total in totals.items() if label != "baseline")
    profiled = args.profile_items
    problems = check_outcome(url, yuxi_items + profiled, base.items + profiled)
    for problem in problems:
        print(f"  CHECK FAILED: {problem}")

    ratio = totals["yuxi"].rate / base.rate if base.rate else 0.0
    ok = ratio >= TARGET_RATIO and not problems
    print(f"\nTarget: yuxi ≥ 1/3 of baseline. Measured {ratio:.2f}x: {verdict(ok)}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    return run_benchmark(
        "lifecycle", "lifecycle (submit → claim → finish)", parse_args(argv), measure
    )


if __name__ == "__main__":
    raise SystemExit(main())
