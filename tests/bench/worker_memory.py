"""Worker memory: resident memory of one worker process, idle and with 1 and 50 runs at once.

- The worker runs as a process of its own, as an operator starts it: ``uv run --no-sync
  yuxi worker`` with ``YUXI_DATABASE_URL`` pointing at the benchmark's database,
  ``YUXI_HOME`` in a temporary directory and ``YUXI_WORKER_CONCURRENCY`` = --concurrency
  (the runs and the three maintenance tasks share these slots). Its memory is read from
  /proc for the yuxi Python process alone (not uv, its parent): VmRSS (resident now), VmHWM
  (the peak so far), RssAnon, Threads, and from smaps_rollup USS (private pages) and PSS.
- Phases, each sampled once: idle once the worker has registered with procrastinate;
  idle after one echo run (``hello`` → ``echo: hello``: imports done, the graph built
  once); while 1 ``/sleep N`` run is running, and idle after it; while --runs ``/sleep N``
  runs are running, and idle after them. The runs of a wave are submitted at once by
  --runs threads (one run each, each on a conversation of its own, with
  ``yuxi.queue.requests.submit_request``). "Running" is sampled once every run is
  ``running`` in agent_runs and has written its ``metadata`` event (it is in its graph),
  plus --settle seconds, and every run is checked to be still ``running`` right after the
  sample; "idle after" is sampled --settle seconds after they all finished. The wave is
  repeated --waves times, to see whether the memory of one wave is reused by the next
  (stable) or added to (a leak).
- Checks: every run ended ``completed`` with exactly one assistant message, ``slept N``
  (``echo: hello`` for the warm-up run).

"per run" = (RSS with --runs running − RSS with 1 running) / (--runs − 1).
"connections" = client backends on the benchmark's database other than the
benchmark's own monitoring connection.

No target is set for this benchmark; it reports.

    uv run python -m tests.bench.worker_memory [--runs 50] [--sleep 20] [--waves 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from tests.bench.api_process import _stop, _yuxi_pid, mib
from tests.bench.harness import (
    BenchDatabase,
    connect,
    create_threads,
    log,
    print_table,
    run_benchmark,
    scalar,
    seed_owner,
)
from yuxi.queue.requests import request_submit

WARMUP_QUERY = "hello"
WARMUP_REPLY = "echo: hello"

RUN_STATE = """
SELECT count(*) FILTER (WHERE r.status = 'running'),
       count(*) FILTER (WHERE r.finished_at IS NOT NULL),
       count(*) FILTER (WHERE EXISTS (
           SELECT 1 FROM yuxi.run_events e WHERE e.run_id = r.run_id AND e.event = 'metadata'))
FROM yuxi.agent_runs r WHERE r.run_id = ANY(%s)
"""
WRONG_OUTCOME = """
SELECT count(*) FROM yuxi.agent_runs r WHERE r.run_id = ANY(%s) AND (r.status <> 'completed'
    OR (SELECT count(*) FROM yuxi.messages m
        WHERE m.run_id = r.run_id AND m.role = 'assistant') <> 1
    OR NOT EXISTS (SELECT 1 FROM yuxi.messages m
        WHERE m.run_id = r.run_id AND m.role = 'assistant' AND m.content = %s))
"""
WORKER_CONNECTIONS = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'client backend'
  AND pid <> pg_backend_pid()
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.worker_memory",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=50, help="runs at once in a wave")
    parser.add_argument("--waves", type=int, default=2, help="waves of --runs, one after another")
    parser.add_argument(
        "--sleep", type=float, default=20.0, help="N of /sleep N: how long each run lasts"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=60,
        help="YUXI_WORKER_CONCURRENCY of the worker (at least --runs + 3 maintenance tasks)",
    )
    parser.add_argument(
        "--settle", type=float, default=2.0, help="seconds between reaching a state and sampling"
    )
    args = parser.parse_args(argv)
    if args.concurrency < args.runs + 3:
        parser.error("--concurrency must be at least --runs + 3 (the maintenance tasks)")
    if args.runs < 2:
        parser.error("--runs must be at least 2")
    return args


# --------------------------------------------------------------------------- the process


@dataclass(frozen=True)
class Memory:
    """One reading of a process's memory (bytes; None where /proc does not tell)."""

    rss: int
    hwm: int
    anon: int
    uss: int | None
    pss: int | None
    threads: int


def read_memory(pid: int) -> Memory:
    status: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM", "RssAnon", "Threads"):
            status[name] = int(rest.split()[0])
    rollup: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
            name, _, rest = line.partition(":")
            rollup[name] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    private = ("Private_Clean", "Private_Dirty")
    return Memory(
        rss=status["VmRSS"] * 1024,
        hwm=status["VmHWM"] * 1024,
        anon=status["RssAnon"] * 1024,
        uss=sum(rollup[key] for key in private) if all(k in rollup for k in private) else None,
        pss=rollup.get("Pss"),
        threads=status["Threads"],
    )


@dataclass(frozen=True)
class WorkerProcess:
    pid: int  # the yuxi Python process (uv is its parent)
    command: str


@contextmanager
def worker_process(
    url: str, concurrency: int, startup_seconds: float = 60.0
) -> Iterator[WorkerProcess]:
    """``yuxi worker`` on ``url`` in a process of its own until the block ends; ready once
    it has registered in procrastinate_workers."""
    uv = shutil.which("uv")
    argv = [uv, "run", "--no-sync", "yuxi", "worker"] if uv else ["yuxi", "worker"]
    shown = " ".join(["uv run --no-sync" if uv else "", "yuxi worker"]).strip()
    with tempfile.TemporaryDirectory(prefix="yuxi-bench-worker-") as home:
        env = {k: v for k, v in os.environ.items() if k != "YUXI_BENCH_DATABASE_URL"}
        env.update(
            YUXI_DATABASE_URL=url,
            YUXI_HOME=home,
            YUXI_WORKER_CONCURRENCY=str(concurrency),
            YUXI_LOG_LEVEL="WARNING",
        )
        log_path = Path(home) / "worker.log"
        with log_path.open("wb") as output:
            launcher = subprocess.Popen(
                [str(arg) for arg in argv],
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=Path(__file__).resolve().parents[2],
            )
        try:
            deadline = time.monotonic() + startup_seconds
            while not scalar(url, "SELECT count(*) FROM procrastinate_workers"):
                if launcher.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the worker did not start (exit {launcher.returncode}):\n"
                        + log_path.read_text()[-4000:]
                    )
                time.sleep(0.1)
            pid = _yuxi_pid(launcher.pid)
            if pid is None:
                raise RuntimeError("cannot find the yuxi process under the launcher")
            yield WorkerProcess(pid, f"{shown} (YUXI_WORKER_CONCURRENCY={concurrency})")
        finally:
            _stop(launcher)


# --------------------------------------------------------------------------- runs


def submit_wave(url: str, uid: UUID, threads: Sequence[UUID], query: str) -> list[UUID]:
    """One run per conversation, each submitted by a thread of its own, all at once
    (each thread connects, then they pass a barrier together and submit)."""
    barrier = threading.Barrier(len(threads))
    run_ids: list[UUID | None] = [None] * len(threads)
    errors: list[BaseException] = []

    async def submit(index: int, thread_id: UUID) -> None:
        async with await AsyncConnection.connect(url, autocommit=True) as conn:
            barrier.wait()
            info = await request_submit(conn, uid=uid, thread_id=thread_id, query=query)
        if info.status != "dispatched" or info.run_id is None:
            raise RuntimeError(f"submit to {thread_id}: {info.status}, run {info.run_id}")
        run_ids[index] = info.run_id

    def one(index: int, thread_id: UUID) -> None:
        try:
            asyncio.run(submit(index, thread_id))
        except BaseException as error:
            errors.append(error)
            barrier.abort()

    workers = [
        threading.Thread(target=one, args=(index, thread_id))
        for index, thread_id in enumerate(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if errors:
        raise RuntimeError(f"{len(errors)} submits failed, first: {errors[0]!r}")
    return [run_id for run_id in run_ids if run_id is not None]


@dataclass(frozen=True)
class Sample:
    phase: str
    running: int
    memory: Memory
    connections: int


class Bench:
    """Submits runs on fresh conversations, follows them in agent_runs and samples the
    worker's memory at each phase."""

    def __init__(
        self,
        url: str,
        uid: UUID,
        threads: list[UUID],
        monitor: AsyncConnection[Any],
        worker: WorkerProcess,
        args: argparse.Namespace,
    ) -> None:
        self.url = url
        self.uid = uid
        self.threads = threads
        self.monitor = monitor
        self.worker = worker
        self.settle: float = args.settle
        self.budget: float = args.sleep + 120.0  # how long a phase may take at most
        self.samples: list[Sample] = []
        self.problems: list[str] = []

    async def submit(self, count: int, query: str) -> list[UUID]:
        batch, self.threads = self.threads[:count], self.threads[count:]
        return await asyncio.to_thread(submit_wave, self.url, self.uid, batch, query)

    async def _state(self, run_ids: list[UUID]) -> tuple[int, int, int]:
        cur = await self.monitor.execute(RUN_STATE, (run_ids,))
        row = await cur.fetchone()
        assert row is not None
        return int(row[0]), int(row[1]), int(row[2])

    async def sample(self, phase: str, running: int = 0) -> Sample:
        memory = read_memory(self.worker.pid)
        cur = await self.monitor.execute(WORKER_CONNECTIONS)
        row = await cur.fetchone()
        taken = Sample(phase, running, memory, int(row[0]) if row else 0)
        self.samples.append(taken)
        log(f"{phase}: RSS {mib(memory.rss)} MiB (peak {mib(memory.hwm)}), {running} running")
        return taken

    async def idle(self, phase: str) -> Sample:
        await asyncio.sleep(self.settle)
        return await self.sample(phase)

    async def while_running(self, phase: str, run_ids: list[UUID]) -> Sample:
        """Samples once every run is running inside its graph, checking right after the
        sample that every one still is."""
        deadline = time.monotonic() + self.budget
        while True:
            running, finished, in_graph = await self._state(run_ids)
            if finished:
                raise RuntimeError(
                    f"{phase}: {finished} runs finished before all ran: raise --sleep"
                )
            if running == in_graph == len(run_ids):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{phase}: only {running} running, {in_graph} in their graph")
            await asyncio.sleep(0.05)
        await asyncio.sleep(self.settle)
        taken = await self.sample(phase, len(run_ids))
        still, _, _ = await self._state(run_ids)
        if still != len(run_ids):
            raise RuntimeError(f"{phase}: {still} of {len(run_ids)} running after the sample")
        return taken

    async def idle_after(self, phase: str, run_ids: list[UUID], reply: str) -> Sample:
        """Waits for the runs to finish, checks their outcome, then samples."""
        deadline = time.monotonic() + self.budget
        while (await self._state(run_ids))[1] < len(run_ids):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{phase}: runs not finished within {self.budget:g} s")
            await asyncio.sleep(0.1)
        cur = await self.monitor.execute(WRONG_OUTCOME, (run_ids, reply))
        row = await cur.fetchone()
        wrong = int(row[0]) if row else len(run_ids)
        if wrong:
            self.problems.append(f"{wrong} of {len(run_ids)} runs did not complete with {reply!r}")
        return await self.idle(phase)


# --------------------------------------------------------------------------- main


def mib_or_dash(value: int | None) -> str:
    return "-" if value is None else mib(value)


def kib(value: int) -> str:
    return f"{round(value / 1024):+,}"


def per_run(many: int, one: int, runs: int) -> str:
    """MiB per run beyond the first: (memory with ``runs`` running - with 1) / (runs - 1)."""
    return f"{(many - one) / (runs - 1) / 2**20:.3f}"


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    url = database.url
    uid = seed_owner(url)
    threads = create_threads(url, uid, 2 + args.runs * args.waves)
    sleep = f"{args.sleep:g}"
    query, reply = f"/sleep {sleep}", f"slept {sleep}"
    monitor = await connect(url)
    try:
        with worker_process(url, args.concurrency) as worker:
            log(f"worker: `{worker.command}`, pid {worker.pid}")
            bench = Bench(url, uid, threads, monitor, worker, args)
            await bench.idle("idle after start")
            warm = await bench.submit(1, WARMUP_QUERY)
            idle = await bench.idle_after("idle after 1 echo run", warm, WARMUP_REPLY)
            single = await bench.submit(1, query)
            one = await bench.while_running("1 run running", single)
            before = await bench.idle_after("1 run: idle after", single, reply)
            waves: list[tuple[Sample, Sample]] = []
            for wave in range(1, args.waves + 1):
                run_ids = await bench.submit(args.runs, query)
                during = await bench.while_running(f"wave {wave}: {args.runs} running", run_ids)
                waves.append(
                    (during, await bench.idle_after(f"wave {wave}: idle after", run_ids, reply))
                )
    finally:
        await monitor.close()

    print_table(
        f"Worker process memory (MiB), /sleep {sleep} runs, concurrency {args.concurrency}",
        ["phase", "running", "RSS", "peak (HWM)", "anon", "USS", "PSS", "threads", "connections"],
        [
            [
                s.phase,
                s.running,
                mib(s.memory.rss),
                mib(s.memory.hwm),
                mib(s.memory.anon),
                mib_or_dash(s.memory.uss),
                mib_or_dash(s.memory.pss),
                s.memory.threads,
                s.connections,
            ]
            for s in bench.samples
        ],
    )
    rows = []
    for index, (during, after) in enumerate(waves):
        previous = waves[index - 1][1] if index else before
        rows.append(
            [
                f"wave {index + 1}",
                per_run(during.memory.rss, one.memory.rss, args.runs),
                per_run(during.memory.anon, one.memory.anon, args.runs),
                mib(after.memory.rss - idle.memory.rss),
                kib(after.memory.rss - previous.memory.rss),
                kib(during.memory.rss - after.memory.rss),
            ]
        )
    print_table(
        f"Per run and per wave; idle = idle after the echo run, RSS {mib(idle.memory.rss)} MiB",
        [
            "wave",
            f"RSS per run, MiB ({args.runs} vs 1)",
            "anon per run, MiB",
            "after - idle, MiB",
            "after - before the wave, KiB",
            "during - after, KiB",
        ],
        rows,
    )
    for problem in bench.problems:
        print(f"  CHECK FAILED: {problem}")
    if not bench.problems:
        total = 2 + args.runs * args.waves
        print(f"  checks: all {total} runs completed with the expected reply")
    return 1 if bench.problems else 0


def main(argv: list[str] | None = None) -> int:
    return run_benchmark(
        "worker_memory", "worker memory (1 and N runs at once)", parse_args(argv), measure
    )


if __name__ == "__main__":
    raise SystemExit(main())
