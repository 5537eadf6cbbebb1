"""The cost of a scrape's database read: ``yuxi.metrics_snapshot()`` on a database with
a long history against one with none, the same work in flight on both.

Two databases on one server, both migrated and given the same in-flight state, built
through the SQL functions: --pending threads with a pending run and two requests queued
behind it, --running claimed runs, --paused threads whose failed run paused a backlog,
--interrupted threads waiting for a resume. The "history" database also gets --runs
finished runs (through request_submit, run_claim and run_finish, five to a thread: one in
ten failed, one in fifty cancelled, and one thread in ten first interrupted and resumed,
which leaves an interrupted run behind) and --occurrences scheduled job occurrences of
the last 30 days on 100 jobs. On both, the delivery jobs of runs that ended are deleted
(as yuxi's workers delete successful jobs); both are then vacuumed and analyzed.

Measurement: --calls calls of ``metrics_snapshot`` (the Python wrapper the API uses, one
round trip) on each database, alternating one call at a time, after a warm-up. Also shown:
the server-side time and buffers of one call (EXPLAIN ANALYZE).

Target: history p50 ≤ 2 × empty p50 and ≤ 25 ms: the read does not grow with the
history (deeper B-trees make each of its index lookups a page or so dearer; a scan of
the runs would cost tens of times more at 100,000 runs).

    uv run python -m tests.bench.metrics_snapshot [--runs 100000] [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import psycopg
from psycopg import conninfo, sql

from tests.bench.harness import (
    AGENT,
    BenchDatabase,
    connect,
    create_threads,
    log,
    percentile,
    print_table,
    run_benchmark,
    seed_owner,
    settle,
    verdict,
)
from yuxi.db.migrations import migrate
from yuxi.queue.metrics import metrics_snapshot

TARGET_RATIO = 2.0
TARGET_P50_MS = 25.0
RUNS_PER_THREAD = 5

# One thread's history: RUNS_PER_THREAD runs, each submitted, claimed and finished; every
# tenth thread's first run is interrupted and resumed first. %(threads)s: uuid[].
HISTORY = """
DO $$
DECLARE
    v_thread uuid;
    v_run uuid;
    v_token uuid;
    v_n integer := 0;
BEGIN
    FOREACH v_thread IN ARRAY {threads} LOOP
        v_n := v_n + 1;
        FOR i IN 1..{per_thread} LOOP
            v_run := (yuxi.request_submit({uid}, v_thread, 'question ' || i)).run_id;
            v_token := (yuxi.run_claim(v_run, 'bench', 600)).lease_token;
            IF i = 1 AND (hashtext(v_thread::text) % 10) = 0 THEN
                PERFORM yuxi.run_finish(v_run, v_token, 'interrupted', '[]', NULL, NULL, NULL,
                                        false);
                v_run := (yuxi.run_resume(v_run, '"yes"'::jsonb)).run_id;
                v_token := (yuxi.run_claim(v_run, 'bench', 600)).lease_token;
            END IF;
            IF (v_n * {per_thread} + i) % 50 = 0 THEN
                PERFORM yuxi.run_request_cancel(v_run);
                PERFORM yuxi.run_finish(v_run, v_token, 'cancelled', '[]', NULL, NULL, NULL, false);
            ELSIF (v_n * {per_thread} + i) % 10 = 0 THEN
                PERFORM yuxi.run_finish(v_run, v_token, 'failed', '[]', 'model_error', 'boom',
                                        NULL, false);
            ELSE
                PERFORM yuxi.run_finish(v_run, v_token, 'completed',
                    '[{{"role": "assistant", "content": "an answer of some length"}}]'::jsonb,
                    NULL, NULL, NULL, false);
            END IF;
        END LOOP;
    END LOOP;
END;
$$
"""

OCCURRENCES = """
WITH jobs AS (
    SELECT (yuxi.job_create(%(uid)s, %(project)s, %(agent)s, 'a scheduled prompt', 'auto',
                            '*/5 * * * *', 'UTC', true, now() + interval '1 day')).id
    FROM generate_series(1, 100)
)
INSERT INTO yuxi.scheduled_job_occurrences
    (job_id, scheduled_for, trigger, status, config_snapshot, request_id, error, created_at)
SELECT j.id, now() - (n * interval '1 minute'), 'schedule',
       CASE WHEN n %% 20 = 0 THEN 'failed' WHEN n %% 7 = 0 THEN 'skipped' ELSE 'submitted' END,
       '{"agent_slug": "chatbot", "prompt": "a scheduled prompt"}',
       CASE WHEN n %% 20 = 0 OR n %% 7 = 0 THEN NULL ELSE 'sched-' || gen_random_uuid() END,
       CASE WHEN n %% 20 = 0 THEN 'agent not visible' END,
       now() - (n * interval '1 minute')
FROM jobs j,
     generate_series(61, 60 + %(per_job)s) AS n  -- older than an hour: history only
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.metrics_snapshot",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=100_000, help="finished runs of history")
    parser.add_argument(
        "--occurrences", type=int, default=100_000, help="scheduled occurrences of history"
    )
    parser.add_argument("--pending", type=int, default=200, help="threads with a pending run")
    parser.add_argument("--running", type=int, default=100, help="threads with a running run")
    parser.add_argument("--paused", type=int, default=50, help="threads paused by a failure")
    parser.add_argument("--interrupted", type=int, default=50, help="threads waiting for a resume")
    parser.add_argument("--calls", type=int, default=200, help="measured calls per database")
    parser.add_argument("--connections", type=int, default=4, help="connections building")
    parser.add_argument(
        "--explain",
        action="store_true",
        help="print the plan of one call on the history database (needs auto_explain)",
    )
    return parser.parse_args(argv)


@contextmanager
def sibling_database(url: str) -> Iterator[str]:
    """A second migrated database on the server of ``url``, dropped afterwards."""
    name = f"{conninfo.conninfo_to_dict(url)['dbname']}_empty"
    admin = conninfo.make_conninfo(url, dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        sibling = conninfo.make_conninfo(url, dbname=name)
        migrate(sibling)
        yield sibling
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def seed(url: str) -> tuple[UUID, UUID]:
    """The owner, the agent and a project; returns (uid, project)."""
    uid = seed_owner(url)
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT (yuxi.project_create(%s, 'bench', '/tmp/bench')).id", (uid,)
        ).fetchone()
    assert row is not None
    return uid, row[0]


def in_flight(url: str, uid: UUID, args: argparse.Namespace) -> None:
    """The same work in flight on every database."""
    total = args.pending + args.running + args.paused + args.interrupted
    threads = create_threads(url, uid, total)
    with psycopg.connect(url, autocommit=True) as conn:
        for index, thread in enumerate(threads):
            run = conn.execute(
                "SELECT (yuxi.request_submit(%s, %s, 'now')).run_id", (uid, thread)
            ).fetchone()
            assert run is not None
            if index < args.pending:
                for text in ("queued one", "queued two"):
                    conn.execute("SELECT yuxi.request_submit(%s, %s, %s)", (uid, thread, text))
                continue
            token = conn.execute(
                "SELECT (yuxi.run_claim(%s, 'bench', 600)).lease_token", (run[0],)
            ).fetchone()
            assert token is not None
            if index < args.pending + args.running:
                continue
            if index < args.pending + args.running + args.paused:
                conn.execute("SELECT yuxi.request_submit(%s, %s, 'waits')", (uid, thread))
                status = "failed"
            else:
                status = "interrupted"
            conn.execute(
                "SELECT yuxi.run_finish(%s, %s, %s, '[]', NULL, NULL, NULL, false)",
                (run[0], token[0], status),
            )


async def history(url: str, uid: UUID, project: UUID, args: argparse.Namespace) -> float:
    """--runs finished runs and --occurrences occurrences; returns the seconds it took."""
    started = time.perf_counter()
    thread_count = max(1, args.runs // RUNS_PER_THREAD)
    threads = create_threads(url, uid, thread_count)
    chunks = [threads[i : i + 200] for i in range(0, len(threads), 200)]
    conns = [await connect(url) for _ in range(args.connections)]

    async def build(conn: Any) -> None:
        while chunks:
            chunk = chunks.pop()
            await conn.execute(
                sql.SQL(HISTORY).format(
                    threads=sql.Literal(chunk),
                    per_thread=sql.Literal(RUNS_PER_THREAD),
                    uid=sql.Literal(uid),
                )
            )

    try:
        await asyncio.gather(*(build(conn) for conn in conns))
    finally:
        for conn in conns:
            await conn.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            OCCURRENCES,
            {
                "uid": uid,
                "project": project,
                "agent": AGENT,
                "per_job": max(1, args.occurrences // 100),
            },
        )
    return time.perf_counter() - started


def tidy(url: str) -> None:
    """What a worker leaves: the delivery jobs of runs that ended deleted (yuxi's workers
    delete successful jobs), then VACUUM and ANALYZE."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM procrastinate_jobs j USING yuxi.agent_runs r"
            " WHERE r.delivery_job_id = j.id AND NOT yuxi.run_is_active(r.status)"
        )
        conn.execute("VACUUM")
    settle(url)


def explain(url: str) -> tuple[float, int]:
    """Server-side milliseconds and shared buffers of one call, on a connection that
    has already planned the function's query (as a pooled API connection has)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(6):  # PL/pgSQL settles on its cached plan after five calls
            conn.execute("SELECT count(*) FROM yuxi.metrics_snapshot()")
        row = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM yuxi.metrics_snapshot()"
        ).fetchone()
    assert row is not None
    plan = row[0][0]
    buffers = int(plan["Plan"].get("Shared Hit Blocks", 0)) + int(
        plan["Plan"].get("Shared Read Blocks", 0)
    )
    return float(plan["Execution Time"]), buffers


def print_plan(url: str) -> None:
    """The plan of the function's query, through auto_explain at NOTICE level."""
    lines: list[str] = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.add_notice_handler(lambda notice: lines.append(str(notice.message_primary)))
        conn.execute("LOAD 'auto_explain'")
        conn.execute("SET auto_explain.log_min_duration = 0")
        conn.execute("SET auto_explain.log_analyze = on")
        conn.execute("SET auto_explain.log_buffers = on")
        conn.execute("SET auto_explain.log_nested_statements = on")
        conn.execute("SET auto_explain.log_level = notice")
        conn.execute("SELECT count(*) FROM yuxi.metrics_snapshot()")
    print("\n\n".join(lines))


def sizes(url: str) -> tuple[int, int, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM yuxi.agent_runs),"
            " (SELECT count(*) FROM yuxi.scheduled_job_occurrences),"
            " pg_total_relation_size('yuxi.agent_runs')"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def snapshot_values(url: str) -> dict[str, float]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT metric || labels::text, value FROM yuxi.metrics_snapshot()"
            " WHERE metric NOT LIKE '%%age_seconds' AND metric <> 'yuxi_maintenance_events_total'"
            "   AND metric <> 'yuxi_delivery_jobs'"
        ).fetchall()
    return {str(key): float(value) for key, value in rows}


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    full = database.url
    with sibling_database(full) as empty:
        for url in (empty, full):
            uid, project = seed(url)
            in_flight(url, uid, args)
            if url == full:
                seconds = await history(url, uid, project, args)
                log(
                    f"history: {args.runs:,} runs, {args.occurrences:,} occurrences"
                    f" in {seconds:.0f} s"
                )
            tidy(url)
        if args.explain:
            print_plan(full)
        # the history must not change what is in flight
        same = snapshot_values(empty) == snapshot_values(full)

        conns = {"empty": await connect(empty), "history": await connect(full)}
        timings: dict[str, list[float]] = {"empty": [], "history": []}
        try:
            for _ in range(10):  # warm-up
                for conn in conns.values():
                    await metrics_snapshot(conn)
            for call in range(args.calls):
                order = ("empty", "history") if call % 2 == 0 else ("history", "empty")
                for label in order:
                    started = time.perf_counter()
                    await metrics_snapshot(conns[label])
                    timings[label].append(time.perf_counter() - started)
        finally:
            for conn in conns.values():
                await conn.close()

        rows = []
        for label, url in (("empty", empty), ("history", full)):
            runs, occurrences, runs_bytes = sizes(url)
            server_ms, buffers = explain(url)
            values = timings[label]
            rows.append(
                [
                    label,
                    f"{runs:,}",
                    f"{occurrences:,}",
                    f"{runs_bytes / 2**20:,.0f}",
                    f"{statistics.mean(values) * 1000:.2f}",
                    f"{percentile(values, 0.5) * 1000:.2f}",
                    f"{percentile(values, 0.99) * 1000:.2f}",
                    f"{server_ms:.2f}",
                    f"{buffers:,}",
                ]
            )
    print_table(
        f"yuxi.metrics_snapshot(), {args.calls} calls per database, alternating (ms)",
        [
            "database",
            "runs",
            "occurrences",
            "agent_runs MiB",
            "mean",
            "p50",
            "p99",
            "server (EXPLAIN ANALYZE)",
            "buffers",
        ],
        rows,
    )
    empty_p50 = percentile(timings["empty"], 0.5) * 1000
    history_p50 = percentile(timings["history"], 0.5) * 1000
    ratio = history_p50 / empty_p50 if empty_p50 else float("inf")
    ok = ratio <= TARGET_RATIO and history_p50 <= TARGET_P50_MS and same
    if not same:
        print("  CHECK FAILED: the two databases disagree on what is in flight")
    print(
        f"\nTarget: history p50 <= {TARGET_RATIO}x empty and <= {TARGET_P50_MS:g} ms."
        f" history/empty = {ratio:.2f}x ({history_p50:.2f} vs {empty_p50:.2f} ms);"
        f" in-flight figures equal: {same}: {verdict(ok)}"
    )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    return run_benchmark(
        "metrics", "metrics_snapshot (a scrape's SQL, history vs none)", parse_args(argv), measure
    )


if __name__ == "__main__":
    raise SystemExit(main())
