"""Recovery: how soon a worker takes runs again after its database went away, and what
the heartbeats and recovery scans cost a worker's throughput.

- restart: a ``yuxi worker`` process on an embedded PostgreSQL of this benchmark's own
  (a server that can be restarted: an external one is never restarted, so with
  ``YUXI_BENCH_DATABASE_URL`` this part still runs on an embedded server, and says so).
  Each trial runs ``pg_ctl restart -m fast`` and then submits a run, again until the
  submit goes through; the time is from the restart command to that run's
  ``completed`` (the server's own restart included, shown on its own). p50 and max of
  --trials.
- terminate: the same with ``pg_terminate_backend`` of every connection to the database
  instead of a restart, on the benchmark's database (external when configured).
- idle: the same submit → completed with nothing done to the database, for reference.
- throughput: echo runs completed per second through a worker in this process (as in
  run_throughput.py: a submitter thread keeps --backlog runs outstanding) with the
  recovery machinery as shipped (procrastinate heartbeat every 10 s, the stalled-delivery
  scan and the job pruning in every maintenance pass) against the same worker without it
  (heartbeat every hour, neither scan), maintenance every --maintenance-seconds (1: the
  scans as often as they can run), ABBA over --rounds. Target: ratio ≥ 0.97.
- killed: two ``yuxi worker`` processes (lease --kill-lease s, maintenance every 1 s);
  each of --kills trials submits ``/sleep 0.3``, SIGKILLs the worker that claimed it
  0.1 s into its attempt, and times the SIGKILL → the run ``completed`` on the other
  worker (an infrastructure retry resuming from the checkpoint; the killed worker is
  started again before the next trial). Target: p50 ≤ lease + 2 s. With it, the
  resumed attempt's own duration (its claim → its end, ``agent_run_attempts``) against
  a fresh attempt's of the same runs uncut.
- appends: batches of 3 events appended per second on one connection through
  ``run_append_batch`` (the worker's keyed, idempotent append) and through
  ``run_append_events`` (no key), alternating; the key must cost no round trip.

    uv run python -m tests.bench.recovery [--trials 5] [--seconds 10] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg

from tests.bench.api_process import BENCH_SECRET_KEY
from tests.bench.harness import (
    BenchDatabase,
    Measured,
    connect,
    create_threads,
    log,
    print_table,
    run_benchmark,
    seed_owner,
    server_cpu_seconds,
    settle,
    verdict,
)
from tests.bench.run_throughput import Submitter
from tests.integration.worker_harness import WorkerProcess, dedicated_server, migrated_database
from yuxi.queue.events import RunEvent, run_append_batch, run_append_events
from yuxi.queue.requests import request_submit
from yuxi.settings import Settings
from yuxi.worker.app import Recovery, run_worker

TARGET_RATIO = 0.97
WITHOUT = Recovery(heartbeat_seconds=3600.0, scans=False)
WITH = Recovery()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.recovery", description=__doc__)
    parser.add_argument("--trials", type=int, default=5, help="restarts and terminations")
    parser.add_argument("--seconds", type=float, default=10.0, help="throughput window")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds of throughput")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--backlog", type=int, default=16)
    parser.add_argument("--maintenance-seconds", type=int, default=1)
    parser.add_argument("--appends", type=int, default=2000, help="appends per side and round")
    parser.add_argument("--kills", type=int, default=10, help="workers SIGKILLed mid-run")
    parser.add_argument("--kill-lease", type=float, default=2.0, help="lease of those workers")
    return parser.parse_args(argv)


# -- recovery after an outage ------------------------------------------------------------


async def _submit_until_accepted(url: str, uid: UUID, thread: UUID, text: str) -> UUID:
    """Submits ``text``, again while the database is not back yet; the run's id."""
    while True:
        try:
            conn = await connect(url)
        except psycopg.OperationalError:
            await asyncio.sleep(0.02)
            continue
        try:
            info = await request_submit(conn, uid=uid, thread_id=thread, query=text)
        except psycopg.OperationalError:
            await asyncio.sleep(0.02)
            continue
        finally:
            await conn.close()
        assert info.run_id is not None
        return info.run_id


async def _completed(url: str, run_id: UUID, within: float = 120.0) -> None:
    deadline = time.monotonic() + within
    while True:
        with contextlib.suppress(psycopg.OperationalError):
            conn = await connect(url)
            try:
                cur = await conn.execute(
                    "SELECT status FROM yuxi.agent_runs WHERE run_id = %s", (run_id,)
                )
                row = await cur.fetchone()
            finally:
                await conn.close()
            if row is not None and row[0] == "completed":
                return
            if row is not None and row[0] in ("failed", "cancelled"):
                raise RuntimeError(f"run {run_id} ended {row[0]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} did not complete within {within}s")
        await asyncio.sleep(0.01)


async def _recovery_times(
    url: str, trials: int, outage: Callable[[], Awaitable[float]]
) -> tuple[list[float], list[float]]:
    """(seconds from the outage to a new run completed, seconds the outage call took)."""
    uid = seed_owner(url) if not _seeded(url) else _owner(url)
    totals, outages = [], []
    for trial in range(trials):
        thread = create_threads(url, uid, 1)[0]
        await asyncio.sleep(1.0)  # the worker settles (its listener, heartbeat, pools)
        started = time.monotonic()
        outages.append(await outage())
        run_id = await _submit_until_accepted(url, uid, thread, f"after outage {trial}")
        await _completed(url, run_id)
        totals.append(time.monotonic() - started)
    return totals, outages


def _seeded(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM yuxi.users WHERE name = 'bench'").fetchone()
    return bool(row and row[0])


def _owner(url: str) -> UUID:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT id FROM yuxi.users WHERE name = 'bench'").fetchone()
    assert row is not None
    return UUID(str(row[0]))


@contextlib.asynccontextmanager
async def _worker(url: str) -> AsyncIterator[WorkerProcess]:
    with tempfile.TemporaryDirectory(prefix="yuxi-bench-worker-") as home:
        worker = WorkerProcess(url, Path(home))
        await worker.start()
        try:
            uid = seed_owner(url) if not _seeded(url) else _owner(url)
            thread = create_threads(url, uid, 1)[0]
            await _completed(url, await _submit_until_accepted(url, uid, thread, "warm up"))
            yield worker
        finally:
            code = await worker.stop()
            if code not in (0, None) or "Traceback" in worker.log():
                print(worker.log(), file=sys.stderr)


async def _terminate_all(url: str) -> float:
    started = time.monotonic()
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    return time.monotonic() - started


async def measure_recovery(database: BenchDatabase, args: argparse.Namespace) -> list[list[Any]]:
    rows: list[list[Any]] = []

    async def nothing() -> float:
        return 0.0

    log("idle: submit → completed with a worker process, nothing else")
    async with _worker(database.url) as worker:
        idle, _ = await _recovery_times(database.url, args.trials, nothing)
        log(f"terminate: pg_terminate_backend of every connection, {args.trials} times")
        terminated, took = await _recovery_times(
            database.url, args.trials, lambda: _terminate_all(database.url)
        )
        assert worker.alive, worker.log()
    rows.append(_row("idle (no outage)", database.server, idle, [0.0] * len(idle)))
    rows.append(_row("pg_terminate_backend, all", database.server, terminated, took))

    log(f"restart: pg_ctl restart -m fast of an embedded server, {args.trials} times")
    with dedicated_server() as server:
        url = migrated_database(server.admin_url)

        async def restart() -> float:
            started = time.monotonic()
            await asyncio.to_thread(server.restart)
            return time.monotonic() - started

        async with _worker(url) as worker:
            restarted, took = await _recovery_times(url, args.trials, restart)
            assert worker.alive, worker.log()
        with psycopg.connect(url) as conn:
            version = conn.execute("SHOW server_version").fetchone()
    embedded = f"embedded {version[0] if version else '?'}"
    rows.append(_row("pg_ctl restart -m fast", embedded, restarted, took))
    return rows


def _row(what: str, server: str, totals: list[float], outages: list[float]) -> list[Any]:
    return [
        what,
        server,
        f"{statistics.median(outages):.2f}",
        f"{statistics.median(totals):.2f}",
        f"{max(totals):.2f}",
        " ".join(f"{t:.2f}" for t in totals),
    ]


# -- the cost of heartbeats and scans ----------------------------------------------------


async def _throughput(
    database: BenchDatabase,
    args: argparse.Namespace,
    uid: UUID,
    threads: collections.deque[UUID],
    label: str,
    recovery: Recovery,
) -> Measured:
    with tempfile.TemporaryDirectory(prefix="yuxi-bench-worker-") as home:
        settings = Settings(
            home=Path(home),
            worker_concurrency=args.concurrency,
            maintenance_seconds=args.maintenance_seconds,
            shutdown_grace_seconds=10.0,
        ).validated()
        worker = asyncio.create_task(
            run_worker(database.url, settings, install_signal_handlers=False, recovery=recovery)
        )
        submitter = Submitter(database.url, uid, threads, args.backlog, 0.05)
        submitter.start()
        try:
            await asyncio.sleep(args.warmup)
            first, first_at = _completed_count(database.url), time.perf_counter()
            cpu, server = time.process_time(), server_cpu_seconds(database.url)
            await asyncio.sleep(args.seconds)
            last, last_at = _completed_count(database.url), time.perf_counter()
            measured = Measured(
                label,
                last - first,
                last_at - first_at,
                time.process_time() - cpu,
                server_cpu_seconds(database.url) - server,
            )
            if worker.done():
                worker.result()
            await submitter.drain()
        finally:
            submitter.stop()
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)
    return measured


def _completed_count(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM yuxi.agent_runs WHERE status = 'completed'"
        ).fetchone()
    return int(row[0]) if row else 0


async def measure_throughput(
    database: BenchDatabase, args: argparse.Namespace
) -> tuple[Measured, Measured]:
    uid = seed_owner(database.url) if not _seeded(database.url) else _owner(database.url)
    threads = collections.deque(create_threads(database.url, uid, 2_000))
    sides = {"without recovery": WITHOUT, "with recovery": WITH}
    totals: dict[str, Measured] = {}
    order = [*sides, *reversed(sides)] * args.rounds
    for index, label in enumerate(order, 1):
        settle(database.url)
        log(f"throughput round {index}/{len(order)}: {label}")
        measured = await _throughput(database, args, uid, threads, label, sides[label])
        log(f"  {measured.rate:.1f} runs/s")
        totals[label] = totals[label] + measured if label in totals else measured
    return totals["without recovery"], totals["with recovery"]


async def _transactions(conn: psycopg.AsyncConnection[Any]) -> int:
    """Transactions committed in this database so far, the caller's own included (with
    autocommit, one per statement sent)."""
    await conn.execute("SELECT pg_stat_force_next_flush()")
    cur = await conn.execute(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def measure_appends(
    database: BenchDatabase, args: argparse.Namespace
) -> dict[str, tuple[Measured, float]]:
    """Per side: the appends measured, and the statements sent per append (nothing else
    writes to the database meanwhile, so commits counted by the server are ours)."""
    uid = _owner(database.url)
    conn = await connect(database.url)
    results: dict[str, tuple[Measured, float]] = {}
    batch = [RunEvent("messages", {"chunks": [{"message_id": "m", "text": "word " * 8}]})] * 3
    try:
        sides = ["keyed (run_append_batch)", "unkeyed (run_append_events)"]
        for label in [*sides, *reversed(sides)] * 2:
            thread = create_threads(database.url, uid, 1)[0]
            info = await request_submit(conn, uid=uid, thread_id=thread, query="appends")
            assert info.run_id is not None
            cur = await conn.execute(
                "SELECT lease_token FROM yuxi.run_claim(%s, 'bench', 600)", (info.run_id,)
            )
            row = await cur.fetchone()
            assert row is not None
            token = row[0]
            warmup = args.appends // 10  # each round's first appends are slower: not timed
            for number in range(1, args.appends + warmup + 1):
                if number == warmup + 1:
                    before = await _transactions(conn)
                    cpu = time.process_time()
                    started = time.perf_counter()
                if label.startswith("keyed"):
                    await run_append_batch(
                        conn, info.run_id, token, number, batch, notify_after_commit=True
                    )
                else:
                    await run_append_events(
                        conn, info.run_id, token, batch, notify_after_commit=True
                    )
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
            # the two statements of _transactions itself, counted at its first call
            statements = (await _transactions(conn) - before - 2) / args.appends
            measured = Measured(label, args.appends, elapsed, cpu, float("nan"))
            if label in results:
                total, per = results[label]
                results[label] = (total + measured, (per + statements) / 2)
            else:
                results[label] = (measured, statements)
    finally:
        await conn.close()
    return results


# -- a worker SIGKILLed mid-run --------------------------------------------------------


async def _started(worker: WorkerProcess) -> None:
    await worker.start()
    while "worker running" not in worker.log():
        assert worker.alive, worker.log()
        await asyncio.sleep(0.1)


async def _run_row(url: str, run_id: UUID) -> tuple[str, str | None]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT status, lease_owner FROM yuxi.agent_runs WHERE run_id = %s", (run_id,)
        )
        row = await cur.fetchone()
    assert row is not None
    return str(row[0]), row[1]


async def _attempt_seconds(url: str, run_id: UUID, attempt: int) -> float:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT extract(epoch FROM ended_at - started_at) FROM yuxi.agent_run_attempts"
            " WHERE run_id = %s AND attempt_no = %s",
            (run_id, attempt),
        )
        row = await cur.fetchone()
    assert row is not None
    return float(row[0])


async def measure_killed(database: BenchDatabase, args: argparse.Namespace) -> list[list[Any]]:
    url = database.url
    uid = seed_owner(url) if not _seeded(url) else _owner(url)
    env = {
        "YUXI_LEASE_SECONDS": f"{args.kill_lease:g}",
        "YUXI_LEASE_RENEW_SECONDS": "0.5",
        "YUXI_SECRET_KEY": BENCH_SECRET_KEY,  # one key for every host of the database
    }
    takeovers, resumed, fresh = [], [], []
    with tempfile.TemporaryDirectory(prefix="yuxi-bench-kill-") as root:
        workers = [WorkerProcess(url, Path(root) / f"w{i}", **env) for i in range(2)]
        for worker in workers:
            await _started(worker)
        try:
            for trial in range(args.kills):
                thread = create_threads(url, uid, 1)[0]
                uncut = await _submit_until_accepted(url, uid, thread, "/sleep 0.3")
                await _completed(url, uncut)
                fresh.append(await _attempt_seconds(url, uncut, 1))
                run_id = await _submit_until_accepted(url, uid, thread, "/sleep 0.3")
                row = await _run_row(url, run_id)
                for _ in range(3000):
                    if row[0] == "running":
                        break
                    await asyncio.sleep(0.01)
                    row = await _run_row(url, run_id)
                await asyncio.sleep(0.1)
                owner = row[1] or ""
                [victim] = [
                    w
                    for w in workers
                    if w.process is not None and owner.endswith(f":{w.process.pid}")
                ]
                killed = time.monotonic()
                victim.kill()
                await _completed(url, run_id, within=60)
                takeovers.append(time.monotonic() - killed)
                resumed.append(await _attempt_seconds(url, run_id, 2))
                assert victim.process is not None
                await victim.process.wait()
                await _started(victim)
                log(f"kill {trial + 1}: completed {takeovers[-1]:.2f} s after the SIGKILL")
        finally:
            for worker in workers:
                await worker.stop()
    target = args.kill_lease + 2.0
    return [
        [
            "SIGKILL → completed elsewhere",
            f"{statistics.median(takeovers):.2f}",
            f"{max(takeovers):.2f}",
            f"≤ {target:g} s {verdict(statistics.median(takeovers) <= target)}",
        ],
        [
            "resumed attempt (claim → end)",
            f"{statistics.median(resumed):.3f}",
            f"{max(resumed):.3f}",
            f"÷ fresh {statistics.median(resumed) / statistics.median(fresh):.2f}",
        ],
        ["fresh attempt (claim → end)", f"{statistics.median(fresh):.3f}", f"{max(fresh):.3f}", ""],
    ]


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    killed = await measure_killed(database, args)
    print_table(
        f"killed: a worker SIGKILLed mid-run, {args.kills} times (lease {args.kill_lease:g} s,"
        " maintenance every 1 s); seconds",
        ["what", "p50", "max", "target"],
        killed,
    )
    recovery = await measure_recovery(database, args)
    print_table(
        "recovery: seconds from the outage to a new run completed (a yuxi worker process)",
        ["outage", "server", "outage call p50 s", "p50 s", "max s", "each trial"],
        recovery,
    )
    without, with_ = await measure_throughput(database, args)
    ratio = with_.rate / without.rate if without.rate else float("nan")
    print_table(
        f"throughput: echo runs/s, maintenance every {args.maintenance_seconds} s,"
        f" {args.rounds * 2} rounds of {args.seconds:.0f} s per side",
        ["worker", "runs", "runs/s", "client cpu ms/run", "server cpu ms/run"],
        [
            [
                m.label,
                m.items,
                f"{m.rate:.1f}",
                f"{m.client_ms_per_item:.2f}",
                f"{m.server_ms_per_item:.2f}",
            ]
            for m in (without, with_)
        ],
    )
    appends = await measure_appends(database, args)
    (keyed, keyed_statements), (unkeyed, _) = appends.values()
    print_table(
        f"appends: 3-event batches on one connection, notify after commit, ABBA x 2 of"
        f" {args.appends}",
        ["append", "batches/s", "client cpu ms/batch", "statements/batch"],
        [
            [m.label, f"{m.rate:.0f}", f"{m.client_ms_per_item:.3f}", f"{per:.2f}"]
            for m, per in appends.values()
        ],
    )
    restart_p50 = float(recovery[-1][3])
    terminate_p50 = float(recovery[1][3])
    ok = ratio >= TARGET_RATIO
    print(f"\n  restart: a new run completed {restart_p50:.2f} s (p50) after the restart began")
    print(f"  terminate: {terminate_p50:.2f} s (p50) after every connection was terminated")
    print(
        f"  appends: keyed/unkeyed = {keyed.rate / unkeyed.rate:.3f},"
        f" {keyed_statements:.2f} statements per keyed batch (the append and its NOTIFY)"
    )
    print(
        f"  throughput with/without recovery = {ratio:.3f} (target ≥ {TARGET_RATIO}) {verdict(ok)}"
    )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_benchmark("recovery", "recovery after outages", args, measure)


if __name__ == "__main__":
    sys.exit(main())
