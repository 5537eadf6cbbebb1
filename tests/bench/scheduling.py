"""Scheduling: --jobs scheduled jobs due at once, fired by the ticker, against the same
submits made directly.

- ``ticker xC``: --jobs jobs are inserted in bulk (untimed) into
  ``yuxi.scheduled_agent_jobs``, all of one user, one project and the ``chatbot`` agent,
  cron ``0 9 * * *`` in UTC, ``next_fire_at`` yesterday's 09:00 UTC slot; then C tickers,
  each on a connection of its own, run ``yuxi.scheduling.ticker.tick_until_idle`` at once
  (batches of 100 due jobs taken with FOR UPDATE SKIP LOCKED, each job fired in a
  savepoint by ``yuxi.job_fire``: a fresh conversation in the project, the prompt
  submitted with ``yuxi.request_submit``, which dispatches a run, one occurrence
  recorded, the next slot computed in Python) until none is due. Timed from the start
  until the last ticker returns.
- ``direct xC``: C connections share --jobs submits, each a fresh conversation made as
  job_fire makes it (``yuxi.thread_create`` with the project and the prompt's first 80
  characters as title), then ``request_submit`` with the prompt, a ``sched-<uuid>``
  request id, approval mode ``auto`` and source ``schedule``: two transactions, as a
  client creating a conversation and submitting to it does.

C is 1 and --tickers; the four variants alternate over --rounds (ABBA), each on a new set
of jobs. Checks, per ticker round: every job has exactly one occurrence, ``submitted``
for the due slot, whose request is dispatched and whose run is pending in a conversation
of the project; no job is left due; each job's next slot is after now. Per direct round:
every submit dispatched a run.

First (--cold-jobs), on the fresh database: that many jobs are inserted, every table is
ANALYZEd while the occurrence and conversation tables are still empty, and one ticker
fires them. This shows what statistics taken on empty tables do to the ticker (the
number of sequential scans of the occurrence table and, with a superuser, the time
spent in ``yuxi.job_busy`` are printed). The database is ANALYZEd again afterwards, so
the measured rounds run with statistics of populated tables.

Target: the ticker's rate ≥ 0.7 × the direct rate, at each concurrency.

    uv run python -m tests.bench.scheduling [--jobs 10000] [--tickers 4] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import psycopg
from psycopg import AsyncConnection

from tests.bench.harness import (
    AGENT,
    BenchDatabase,
    connect,
    log,
    print_table,
    run_benchmark,
    seed_owner,
    server_cpu_seconds,
    settle,
    verdict,
)
from yuxi.queue.requests import request_submit
from yuxi.scheduling.ticker import TickResult, tick_until_idle

TARGET_RATIO = 0.7
CRON = "0 9 * * *"
ZONE = "UTC"
PROMPT = "Daily report {}: summarise what changed in the project since yesterday"

INSERT_JOBS = """
INSERT INTO yuxi.scheduled_agent_jobs
    (uid, project_id, agent_slug, prompt, cron, timezone, next_fire_at)
SELECT %(u)s, %(p)s, %(a)s, format(%(prompt)s, i), %(c)s, %(z)s, %(slot)s
FROM generate_series(%(first)s::int, %(last)s::int) i
RETURNING id
"""
CHECK_JOBS = """
SELECT count(*),
       count(*) FILTER (WHERE o.n = 1),
       count(*) FILTER (WHERE o.submitted = 1 AND o.n = 1),
       count(*) FILTER (WHERE j.next_fire_at > now() AND j.last_fired_at IS NOT NULL),
       count(*) FILTER (WHERE o.ok = 1)
FROM yuxi.scheduled_agent_jobs j
CROSS JOIN LATERAL (
    SELECT count(*) AS n,
           count(*) FILTER (WHERE oc.status = 'submitted' AND oc.trigger = 'schedule'
                            AND oc.scheduled_for = %(slot)s) AS submitted,
           count(*) FILTER (WHERE r.status = 'dispatched' AND run.status = 'pending'
                            AND c.project_id = %(p)s AND c.thread_id = oc.thread_id) AS ok
    FROM yuxi.scheduled_job_occurrences oc
    LEFT JOIN yuxi.agent_run_requests r ON r.request_id = oc.request_id
    LEFT JOIN yuxi.agent_runs run ON run.run_id = r.dispatched_run_id
    LEFT JOIN yuxi.conversations c ON c.thread_id = r.thread_id
    WHERE oc.job_id = j.id
) o
WHERE j.id = ANY(%(ids)s)
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.scheduling",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs due at once, per variant")
    parser.add_argument("--tickers", type=int, default=4, help="concurrent tickers (and 1)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of all variants")
    parser.add_argument(
        "--cold-jobs",
        type=int,
        default=1_000,
        help="jobs fired first with statistics of empty tables (0: skip)",
    )
    return parser.parse_args(argv)


@dataclass
class Variant:
    kind: str  # "ticker" or "direct"
    concurrency: int
    seconds: list[float] = field(default_factory=list)
    items: int = 0
    client_cpu: float = 0.0
    server_cpu: float = 0.0
    per_connection: list[list[int]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.kind} x{self.concurrency}"

    @property
    def rate(self) -> float:
        return self.items / sum(self.seconds) if self.seconds else 0.0


@dataclass(frozen=True)
class Owner:
    uid: UUID
    project: UUID
    slot: datetime


def due_slot() -> datetime:
    """Yesterday's 09:00 UTC: a slot of ``0 9 * * *`` that is always in the past."""
    today = datetime.now(UTC).replace(hour=9, minute=0, second=0, microsecond=0)
    return today - timedelta(days=1)


def insert_jobs(url: str, owner: Owner, first: int, count: int) -> list[UUID]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            INSERT_JOBS,
            {
                "u": owner.uid,
                "p": owner.project,
                "a": AGENT,
                "prompt": PROMPT.replace("{}", "%s"),
                "c": CRON,
                "z": ZONE,
                "slot": owner.slot,
                "first": first,
                "last": first + count - 1,
            },
        ).fetchall()
    return [row[0] for row in rows]


def check_jobs(url: str, owner: Owner, ids: list[UUID]) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            CHECK_JOBS, {"slot": owner.slot, "p": owner.project, "ids": ids}
        ).fetchone()
        due = conn.execute(
            "SELECT count(*) FROM yuxi.scheduled_agent_jobs"
            " WHERE enabled AND deleted_at IS NULL AND next_fire_at <= now()"
        ).fetchone()
    assert row is not None and due is not None
    jobs, one, submitted, moved, ok = row
    problems = []
    if not jobs == one == submitted == moved == ok == len(ids):
        problems.append(
            f"of {len(ids)} jobs: {jobs} found, {one} with exactly one occurrence,"
            f" {submitted} submitted for the slot, {moved} moved to a later slot,"
            f" {ok} with a dispatched request and a pending run in the project"
        )
    if due[0]:
        problems.append(f"{due[0]} jobs are still due")
    return problems


async def run_tickers(url: str, owner: Owner, variant: Variant, first: int, jobs: int) -> list[str]:
    ids = insert_jobs(url, owner, first, jobs)
    settle(url)
    conns = [await connect(url) for _ in range(variant.concurrency)]
    try:
        cpu = time.process_time()
        server = server_cpu_seconds(url)
        started = time.perf_counter()
        results: list[TickResult] = await asyncio.gather(*(tick_until_idle(conn) for conn in conns))
        variant.seconds.append(time.perf_counter() - started)
        variant.client_cpu += time.process_time() - cpu
        variant.server_cpu += server_cpu_seconds(url) - server
    finally:
        for conn in conns:
            await conn.close()
    variant.items += jobs
    variant.per_connection.append([r.fired for r in results])
    problems = check_jobs(url, owner, ids)
    fired = sum(r.fired for r in results)
    others = sum(r.skipped + r.failed + r.retry for r in results)
    if fired != jobs or others:
        problems.append(f"tickers fired {fired} of {jobs} ({others} skipped/failed/retried)")
    return problems


async def run_direct(url: str, owner: Owner, variant: Variant, first: int, jobs: int) -> list[str]:
    settle(url)
    conns = [await connect(url) for _ in range(variant.concurrency)]
    numbers = iter(range(first, first + jobs))
    undispatched = 0

    async def submitter(conn: AsyncConnection[Any]) -> int:
        nonlocal undispatched
        done = 0
        for number in numbers:
            prompt = PROMPT.format(number)
            cur = await conn.execute(
                "SELECT (yuxi.thread_create(%s, %s, %s, left(btrim(%s), 80))).thread_id",
                (owner.uid, AGENT, owner.project, prompt),
            )
            row = await cur.fetchone()
            assert row is not None
            info = await request_submit(
                conn,
                uid=owner.uid,
                thread_id=row[0],
                query=prompt,
                request_id=f"sched-{uuid4()}",
                tool_approval_mode="auto",
                source="schedule",
            )
            if info.status != "dispatched" or info.run_id is None:
                undispatched += 1
            done += 1
        return done

    try:
        cpu = time.process_time()
        server = server_cpu_seconds(url)
        started = time.perf_counter()
        counts = await asyncio.gather(*(submitter(conn) for conn in conns))
        variant.seconds.append(time.perf_counter() - started)
        variant.client_cpu += time.process_time() - cpu
        variant.server_cpu += server_cpu_seconds(url) - server
    finally:
        for conn in conns:
            await conn.close()
    variant.items += sum(counts)
    variant.per_connection.append(list(counts))
    problems = []
    if sum(counts) != jobs or undispatched:
        problems.append(f"direct: {sum(counts)} of {jobs} submitted, {undispatched} undispatched")
    return problems


async def cold_start(url: str, owner: Owner, jobs: int) -> tuple[float, list[str]]:
    """One ticker fires ``jobs`` jobs right after an ANALYZE of (nearly) empty tables;
    returns the seconds it took."""
    ids = insert_jobs(url, owner, 1, jobs)
    settle(url)  # ANALYZE: scheduled_job_occurrences and conversations are empty
    conn = await connect(url)
    with suppress(psycopg.errors.InsufficientPrivilege):
        await conn.execute("SET track_functions = 'all'")
    before = scans(url)
    try:
        started = time.perf_counter()
        result = await tick_until_idle(conn)
        elapsed = time.perf_counter() - started
    finally:
        await conn.close()
    await asyncio.sleep(1.0)  # the closed session's statistics reach the cumulative views
    after = scans(url)
    problems = check_jobs(url, owner, ids)
    if result.fired != jobs:
        problems.append(f"cold start: fired {result.fired} of {jobs}: {result}")
    delta = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in after}
    print_table(
        f"Cold start: {jobs:,} jobs fired by one ticker after an ANALYZE of empty tables",
        ["fires/s", "seconds", "seq scans of occurrences", "rows they read", "job_busy ms"],
        [
            [
                f"{jobs / elapsed:,.0f}",
                f"{elapsed:.1f}",
                f"{delta['occurrence seq scans']:,.0f}",
                f"{delta['occurrence rows read']:,.0f}",
                f"{delta['job_busy ms']:,.0f}" if delta.get("job_busy ms") else "-",
            ]
        ],
    )
    return elapsed, problems


def scans(url: str) -> dict[str, float]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT seq_scan, seq_tup_read FROM pg_stat_user_tables"
            " WHERE schemaname = 'yuxi' AND relname = 'scheduled_job_occurrences'"
        ).fetchone()
        busy = conn.execute(
            "SELECT total_time FROM pg_stat_user_functions"
            " WHERE schemaname = 'yuxi' AND funcname = 'job_busy'"
        ).fetchone()
    assert row is not None
    return {
        "occurrence seq scans": float(row[0]),
        "occurrence rows read": float(row[1]),
        "job_busy ms": float(busy[0]) if busy else 0.0,
    }


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    url = database.url
    uid = seed_owner(url)
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT (yuxi.project_create(%s, 'bench', '/tmp/yuxi-bench')).id", (uid,)
        ).fetchone()
    assert row is not None
    owner = Owner(uid, row[0], due_slot())
    log(f"every job is due at {owner.slot.isoformat()} (cron {CRON!r} in {ZONE})")

    variants = [
        Variant("ticker", 1),
        Variant("direct", 1),
        Variant("ticker", args.tickers),
        Variant("direct", args.tickers),
    ]
    problems: list[str] = []
    first = 1
    cold_seconds = 0.0
    if args.cold_jobs:
        cold_seconds, problems = await cold_start(url, owner, args.cold_jobs)
        first += args.cold_jobs
    for round_no in range(args.rounds):
        for variant in variants if round_no % 2 == 0 else variants[::-1]:
            run = run_tickers if variant.kind == "ticker" else run_direct
            problems += await run(url, owner, variant, first, args.jobs)
            first += args.jobs
            log(
                f"round {round_no + 1}: {variant.label}: {args.jobs:,} in"
                f" {variant.seconds[-1]:.1f} s ({args.jobs / variant.seconds[-1]:,.0f}/s);"
                f" per connection {variant.per_connection[-1]}"
            )

    by_label = {v.label: v for v in variants}
    rows = []
    for variant in variants:
        direct = by_label[f"direct x{variant.concurrency}"]
        rows.append(
            [
                variant.label,
                f"{variant.items:,}",
                " / ".join(f"{s:.1f}" for s in variant.seconds),
                f"{variant.rate:,.0f}",
                " / ".join(f"{args.jobs / s:,.0f}" for s in variant.seconds),
                f"{variant.server_cpu / variant.items * 1000:.2f}",
                f"{variant.client_cpu / variant.items * 1000:.2f}",
                f"{variant.rate / direct.rate:.2f}" if direct.rate else "-",
            ]
        )
    print_table(
        f"{args.jobs:,} jobs due at once (ticker) or {args.jobs:,} thread_create + submit"
        f" (direct), {args.rounds} rounds",
        [
            "variant",
            "fires",
            "seconds per round",
            "fires/s",
            "per round",
            "server cpu ms/fire",
            "client cpu ms/fire",
            "vs direct",
        ],
        rows,
    )
    if args.cold_jobs:
        cold_rate = args.cold_jobs / cold_seconds
        warm = by_label["ticker x1"].rate
        print(
            f"  cold start: {cold_rate:,.0f} fires/s with statistics of empty tables, against"
            f" {warm:,.0f} for ticker x1 above ({cold_rate / warm:.2f}x)"
        )
    for problem in problems:
        print(f"  CHECK FAILED: {problem}")
    ratios = {
        c: by_label[f"ticker x{c}"].rate / by_label[f"direct x{c}"].rate for c in (1, args.tickers)
    }
    ok = all(r >= TARGET_RATIO for r in ratios.values()) and not problems
    shown = ", ".join(f"{r:.2f}x with {c}" for c, r in ratios.items())
    print(
        f"\nTarget: ticker ≥ {TARGET_RATIO}x the direct rate at each concurrency."
        f" Measured {shown}: {verdict(ok)}"
    )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    return run_benchmark(
        "scheduling", "scheduling (ticker vs direct submits)", parse_args(argv), measure
    )


if __name__ == "__main__":
    raise SystemExit(main())
