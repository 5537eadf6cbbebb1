"""Wake-up latency: from a submit's commit to a listening worker hearing about it.

A listener connection LISTENs on the channel a yuxi worker listens on: procrastinate's
``procrastinate_queue_v1#yuxi_runs`` (the worker is started with queues=[yuxi_runs, ...];
procrastinate's job-insert trigger notifies that channel and ``procrastinate_any_queue_v1``,
which --channel can select instead). A submitter sends --submits requests, one at a time, each
on an idle conversation after --gap-ms of quiet, so each dispatches a run and inserts its
delivery job. The submit runs in an explicit transaction; the clock starts when COMMIT
returns (``commit→notify``; the same interval measured from just before COMMIT is sent
is shown too) and stops when the notification for that job reaches the listener. Both
sides run on one event loop, timed with one perf_counter.

Unless --no-claim is given, the listener then does what a worker does next: fetches the
job (``procrastinate_fetch_job_v2``) and claims the run (``run_claim``) on a second
connection; ``commit→claimed`` is the time until the claim returns.

Target: p99 commit→notify ≤ 20 ms.

    uv run python -m tests.bench.wakeup [--submits 500] [--gap-ms 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection, sql

from tests.bench.harness import (
    BenchDatabase,
    connect,
    create_threads,
    log,
    percentile,
    print_table,
    run_benchmark,
    seed_owner,
    verdict,
)
from yuxi.queue.requests import request_submit
from yuxi.queue.runs import run_claim

TARGET_P99_MS = 20.0
LEASE_SECONDS = 600.0
QUEUE = "yuxi_runs"
WARM_UP = 20  # submits not timed: they warm up plans and connections


@dataclass
class Pending:
    """One submit waiting for its notification (and claim)."""

    job_id: int
    run_id: UUID
    commit_sent: float = 0.0
    committed: float = 0.0
    notified: float = 0.0
    claimed: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.wakeup",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--submits", type=int, default=500, help="submits measured")
    parser.add_argument(
        "--gap-ms", type=float, default=5.0, help="quiet time before each submit (± 50%%)"
    )
    parser.add_argument(
        "--channel", default=f"procrastinate_queue_v1#{QUEUE}", help="channel to LISTEN on"
    )
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds to wait per submit")
    parser.add_argument(
        "--no-claim", action="store_true", help="only time the notification, not the claim"
    )
    return parser.parse_args(argv)


class Listener:
    """Receives notifications and, optionally, fetches the job and claims its run."""

    def __init__(self, listen: AsyncConnection[Any], work: AsyncConnection[Any], claim: bool):
        self.listen = listen
        self.work = work
        self.claim = claim
        self.expected: dict[int, Pending] = {}
        self.strays = 0  # notifications for jobs nobody registered
        self.worker_id = 0

    async def start(self, channel: str) -> None:
        await self.listen.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        cur = await self.work.execute("SELECT worker_id FROM procrastinate_register_worker_v1()")
        row = await cur.fetchone()
        assert row is not None
        self.worker_id = int(row[0])

    async def run(self) -> None:
        async for note in self.listen.notifies():
            arrived = time.perf_counter()
            job_id = int(json.loads(note.payload)["job_id"])
            pending = self.expected.pop(job_id, None)
            if pending is None:
                self.strays += 1
                continue
            await self.deliver(pending, arrived)

    async def deliver(self, pending: Pending, arrived: float) -> None:
        pending.notified = arrived
        if self.claim:
            cur = await self.work.execute(
                "SELECT id, args FROM procrastinate_fetch_job_v2(%s, %s)", ([QUEUE], self.worker_id)
            )
            row = await cur.fetchone()
            assert row is not None and row[0] == pending.job_id, (row, pending.job_id)
            claimed = await run_claim(
                self.work, UUID(row[1]["run_id"]), worker="listener", lease_seconds=LEASE_SECONDS
            )
            pending.claimed = time.perf_counter()
            assert claimed.run_id == pending.run_id
            await self.work.execute(
                "SELECT procrastinate_finish_job_v1(%s, 'succeeded', false)", (pending.job_id,)
            )
        pending.done.set()

    def expect(self, pending: Pending) -> None:
        """Registers a submit before its COMMIT: the notification may beat the reply."""
        self.expected[pending.job_id] = pending


async def submit_one(
    conn: AsyncConnection[Any], listener: Listener, uid: UUID, thread: UUID
) -> Pending:
    async with conn.transaction():
        info = await request_submit(conn, uid=uid, thread_id=thread, query="wake up")
        assert info.run_id is not None, info
        cur = await conn.execute(
            "SELECT delivery_job_id FROM yuxi.agent_runs WHERE run_id = %s", (info.run_id,)
        )
        row = await cur.fetchone()
        assert row is not None and row[0] is not None
        pending = Pending(job_id=int(row[0]), run_id=info.run_id)
        listener.expect(pending)
        pending.commit_sent = time.perf_counter()
    pending.committed = time.perf_counter()
    return pending


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    url = database.url
    uid = seed_owner(url)
    threads = create_threads(url, uid, args.submits + WARM_UP)
    listen, work, submitter = await connect(url), await connect(url), await connect(url)
    listener = Listener(listen, work, claim=not args.no_claim)
    await listener.start(args.channel)
    listening = asyncio.create_task(listener.run())
    done: list[Pending] = []
    lost = 0
    try:
        for index, thread in enumerate(threads):
            await asyncio.sleep(args.gap_ms / 1000 * random.uniform(0.5, 1.5))
            pending = await submit_one(submitter, listener, uid, thread)
            try:
                await asyncio.wait_for(pending.done.wait(), args.timeout)
            except TimeoutError:
                lost += 1
                continue
            if index >= WARM_UP:
                done.append(pending)
    finally:
        listening.cancel()
        for conn in (listen, work, submitter):
            await conn.close()
    log(
        f"{len(done)} submits timed after {WARM_UP} warm-up submits;"
        f" {lost} notifications missing, {listener.strays} unexpected"
    )

    def row(name: str, values: list[float]) -> list[str]:
        ms = [value * 1000 for value in values]
        quantiles = (f"{percentile(ms, q):.3f}" for q in (0.5, 0.9, 0.99))
        return [name, f"{min(ms):.3f}", *quantiles, f"{max(ms):.3f}"]

    rows = [
        row("commit→notify", [p.notified - p.committed for p in done]),
        row("COMMIT sent→notify", [p.notified - p.commit_sent for p in done]),
        row("COMMIT round trip", [p.committed - p.commit_sent for p in done]),
    ]
    if not args.no_claim:
        rows.append(row("commit→claimed", [p.claimed - p.committed for p in done]))
    print_table(
        f"Wake-up latency over {len(done)} submits on idle threads (ms; channel {args.channel})",
        ["interval", "min", "p50", "p90", "p99", "max"],
        rows,
    )
    early = sum(1 for p in done if p.notified < p.committed)
    print(
        f"  {early} of {len(done)} notifications arrived before the COMMIT reply did"
        " (negative commit→notify)"
    )

    p99 = percentile([(p.notified - p.committed) * 1000 for p in done], 0.99)
    ok = p99 <= TARGET_P99_MS and lost == 0 and listener.strays == 0 and bool(done)
    print(
        f"\nTarget: p99 commit→notify ≤ {TARGET_P99_MS:g} ms. Measured {p99:.3f} ms: {verdict(ok)}"
    )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    return run_benchmark(
        "wakeup", "wakeup (commit → LISTEN notification)", parse_args(argv), measure
    )


if __name__ == "__main__":
    raise SystemExit(main())
