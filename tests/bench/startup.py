"""Start-up: how long a new `yuxi api` takes to answer its health check and a new
`yuxi worker` to take jobs — what each step of a rolling restart waits for.

- ``api``: from spawning `yuxi api` to the first 200 of ``GET /api/system/health``.
- ``worker``: from spawning `yuxi worker` to its row in ``procrastinate_workers`` (from
  then on it fetches jobs, and the health check counts it among ``workers``); and to
  the end of its first run (a `builtin:scripted` echo submitted just before the spawn,
  so it waits for the worker): what a run queued during a restart waits.
- ``import``: the CPU seconds of ``import yuxi.api.app`` and of ``import
  yuxi.worker.app`` in a new process (what the module graph costs, before any I/O).

Each process is the virtualenv's ``yuxi`` script (no ``uv run`` in front) on the
benchmark's database (so no embedded server start is counted), with a home of its own
and the benchmark's server key. Three ways the Python bytecode can be, one side each:

- ``compiled``: every module from a ``.pyc`` (``PYTHONPYCACHEPREFIX`` on a tree that one
  untimed start of each command fills), as an installed yuxi whose virtualenv was made
  with ``uv sync --compile-bytecode`` or whose first start could write its cache;
- ``checkout``: this checkout as it is: the virtualenv's ``.pyc`` (``uv sync
  --compile-bytecode``), yuxi's own modules compiled at every start (an editable
  install, and ``PYTHONDONTWRITEBYTECODE=1`` on these machines keeps them uncached);
- ``source``: nothing cached (``PYTHONPYCACHEPREFIX`` on an empty directory and
  ``PYTHONDONTWRITEBYTECODE=1``): every module compiled at every start, as a virtualenv
  made without ``--compile-bytecode`` on a machine that never writes bytecode (the
  standard library's modules too, which such a virtualenv would find compiled).

With ``--against REV`` the yuxi of that revision (its ``yuxi/`` and ``sql/`` from ``git
archive``, ahead of this checkout on ``PYTHONPATH``, in the same virtualenv) is started
too, beside this checkout's, on every side.

The sides alternate: each round starts every (side, code) once, in turn. A figure is
the median of --repeat rounds, with the worst shown too; the process's CPU seconds until
it was ready are shown beside it. Targets: the API and a worker ready in < 2 s with
compiled bytecode.

    uv run python -m tests.bench.startup [--repeat 5] [--against REV]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import httpx
import psycopg
from psycopg import AsyncConnection

from tests.bench.api_process import BENCH_SECRET_KEY, HEALTH, free_port
from tests.bench.harness import (
    BenchDatabase,
    _proc_stat,
    create_threads,
    log,
    print_table,
    run_benchmark,
    seed_owner,
    verdict,
)
from yuxi.queue.requests import request_submit

TARGET_SECONDS = 2.0
SIDES = ("compiled", "checkout", "source")
COMMANDS = ("api", "worker")
MEASURES = ("api", "worker", "first run")
IMPORTS = {"api": "yuxi.api.app", "worker": "yuxi.worker.app"}
IMPORT_PROBE = (
    "import sys, time; t = time.process_time(); __import__(sys.argv[1]);"
    " print(time.process_time() - t)"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.startup", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--repeat", type=int, default=5, help="rounds of every start")
    parser.add_argument(
        "--against",
        metavar="REV",
        default=None,
        help="also start the yuxi of this git revision (its yuxi/ and sql/, on PYTHONPATH"
        " ahead of this checkout, in this virtualenv), side by side in every round",
    )
    return parser.parse_args(argv)


def yuxi_script() -> str:
    return str(Path(sys.executable).with_name("yuxi"))


def bytecode_env(side: str, warm: Path, cold: Path) -> dict[str, str]:
    """The environment variables that make ``side``'s bytecode."""
    if side == "compiled":
        return {"PYTHONPYCACHEPREFIX": str(warm), "PYTHONDONTWRITEBYTECODE": "1"}
    if side == "source":
        return {"PYTHONPYCACHEPREFIX": str(cold), "PYTHONDONTWRITEBYTECODE": "1"}
    return {"PYTHONDONTWRITEBYTECODE": "1"}


def cpu_seconds(pid: int) -> float:
    fields = _proc_stat(Path(f"/proc/{pid}/stat"))
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def workers_registered(conn: psycopg.Connection[tuple[int]]) -> int:
    row = conn.execute("SELECT count(*) FROM procrastinate_workers").fetchone()
    return row[0] if row else 0


class Starter:
    """Starts and stops the two commands on one database, each in a home of its own."""

    def __init__(self, database: BenchDatabase, root: Path) -> None:
        self.url = database.url
        self.root = root
        self.starts = 0
        self.uid = seed_owner(database.url)

    def _spawn(self, command: str, extra: Mapping[str, str]) -> subprocess.Popen[bytes]:
        self.starts += 1
        home = self.root / f"home-{self.starts}"
        home.mkdir(parents=True)
        env = {
            **os.environ,
            "YUXI_DATABASE_URL": self.url,
            "YUXI_HOME": str(home),
            "YUXI_SECRET_KEY": BENCH_SECRET_KEY,
            "YUXI_LOG_LEVEL": "WARNING",
            **extra,
        }
        env.pop("YUXI_BENCH_DATABASE_URL", None)
        with (self.root / f"{command}-{self.starts}.log").open("wb") as log_file:
            return subprocess.Popen(  # the child keeps its own copy of the log file
                [yuxi_script(), command], env=env, stdout=log_file, stderr=log_file, cwd=home
            )

    async def api(self, extra: Mapping[str, str]) -> tuple[float, float]:
        """Seconds from spawn to health 200, and the process's CPU seconds by then."""
        port = free_port()
        started = time.perf_counter()
        process = self._spawn("api", {**extra, "YUXI_PORT": str(port)})
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=2) as probe:
                while True:
                    try:
                        if (await probe.get(HEALTH)).status_code == 200:
                            return time.perf_counter() - started, cpu_seconds(process.pid)
                    except httpx.TransportError:
                        pass
                    if process.poll() is not None:
                        raise RuntimeError(f"yuxi api exited with {process.returncode}")
                    await asyncio.sleep(0.01)
        finally:
            await stop(process)

    async def worker(self, extra: Mapping[str, str]) -> tuple[float, float, float]:
        """Seconds from spawn to the worker's registration and to the end of its first
        run, and the process's CPU seconds at its registration."""
        [thread] = create_threads(self.url, self.uid, 1)
        async with await AsyncConnection.connect(self.url, autocommit=True) as conn:
            run_id = (await request_submit(conn, uid=self.uid, thread_id=thread, query="hi")).run_id
        with psycopg.connect(self.url, autocommit=True) as conn:
            before = workers_registered(conn)
            started = time.perf_counter()
            process = self._spawn("worker", extra)
            try:
                while workers_registered(conn) <= before:
                    if process.poll() is not None:
                        raise RuntimeError(f"yuxi worker exited with {process.returncode}")
                    await asyncio.sleep(0.01)
                registered, cpu = time.perf_counter() - started, cpu_seconds(process.pid)
                while run_status(conn, run_id) != "completed":
                    if time.perf_counter() - started > 60:
                        raise RuntimeError(f"run {run_id}: {run_status(conn, run_id)} after 60 s")
                    await asyncio.sleep(0.01)
                return registered, time.perf_counter() - started, cpu
            finally:
                await stop(process)


def run_status(conn: psycopg.Connection[tuple[str]], run_id: object) -> str | None:
    row = conn.execute("SELECT status FROM yuxi.agent_runs WHERE run_id = %s", (run_id,)).fetchone()
    return row[0] if row else None


async def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    await asyncio.to_thread(process.wait, 60)


def import_cpu(module: str, extra: Mapping[str, str]) -> float:
    # not in this checkout's directory: ``-c`` puts the working directory first on
    # sys.path, ahead of PYTHONPATH (--against)
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE, module],
        cwd=tempfile.gettempdir(),
        env={**os.environ, **extra},
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return float(result.stdout.strip())


def checkout_of(rev: str, into: Path) -> Path:
    """``rev``'s yuxi/ and sql/ in ``into`` (``git archive``: no worktree is made)."""
    repo = Path(__file__).resolve().parents[2]
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, "yuxi", "sql"],
        cwd=repo,
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


Key = tuple[str, str, str]  # (version, what, side)


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="yuxi-bench-startup-") as tmp:
        root = Path(tmp)
        warm, cold = root / "pycache-warm", root / "pycache-cold"
        cold.mkdir()
        versions: dict[str, dict[str, str]] = {"this checkout": {}}
        if args.against:
            code = checkout_of(args.against, root / "against")
            versions[args.against] = {"PYTHONPATH": str(code)}
            log(f"against {args.against}: its yuxi/ from {code}")
        starter = Starter(database, root)
        for code_env in versions.values():
            # fill the compiled side's cache: one untimed start of each (the worker's
            # with its first run), allowed to write
            filling = {
                **code_env,
                "PYTHONPYCACHEPREFIX": str(warm),
                "PYTHONDONTWRITEBYTECODE": "",
            }
            await starter.api(filling)
            await starter.worker(filling)
            for module in IMPORTS.values():
                import_cpu(module, filling)
        ready: dict[Key, list[tuple[float, float]]] = {}
        imports: dict[Key, list[float]] = {}
        for round_no in range(args.repeat):
            for side in SIDES:
                for version, code_env in versions.items():
                    env = {**code_env, **bytecode_env(side, warm, cold)}
                    ready.setdefault((version, "api", side), []).append(await starter.api(env))
                    registered, first_run, cpu = await starter.worker(env)
                    ready.setdefault((version, "worker", side), []).append((registered, cpu))
                    ready.setdefault((version, "first run", side), []).append(
                        (first_run, float("nan"))
                    )
                    for command, module in IMPORTS.items():
                        imports.setdefault((version, command, side), []).append(
                            import_cpu(module, env)
                        )
            shown = "; ".join(
                f"{version}: "
                + ", ".join(
                    f"{what} {ready[version, what, 'compiled'][-1][0]:.2f}" for what in MEASURES
                )
                for version in versions
            )
            log(f"round {round_no + 1} (compiled): {shown} s")
    return report(list(versions), ready, imports)


def report(
    versions: list[str],
    ready: Mapping[Key, list[tuple[float, float]]],
    imports: Mapping[Key, list[float]],
) -> int:
    rows = []
    ok = True
    for what in MEASURES:
        for side in SIDES:
            for version in versions:
                seconds = [s for s, _ in ready[version, what, side]]
                median = statistics.median(seconds)
                target = ""
                if side == "compiled" and what in COMMANDS and version == versions[0]:
                    passed = median < TARGET_SECONDS
                    ok &= passed
                    target = f"< {TARGET_SECONDS:g} s {verdict(passed)}"
                cpu = statistics.median(c for _, c in ready[version, what, side])
                imported = imports.get((version, what, side))
                rows.append(
                    (
                        "yuxi worker: first run" if what == "first run" else f"yuxi {what}",
                        side,
                        version,
                        f"{median:.2f}",
                        f"{max(seconds):.2f}",
                        "" if cpu != cpu else f"{cpu:.2f}",
                        f"{statistics.median(imported):.2f}" if imported else "",
                        target,
                    )
                )
    print_table(
        "Start-up: spawn -> ready (seconds)",
        ("what", "bytecode", "code", "p50", "max", "CPU p50", "import CPU p50", "target"),
        rows,
    )
    print(
        "  ready: api = health 200; worker = registered in procrastinate_workers;"
        " first run = a run queued before the spawn completed"
    )
    print(f"  import CPU: {', '.join(f'{c} = import {m}' for c, m in IMPORTS.items())}")
    print("  CPU: the process's user + system seconds when it was ready")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_benchmark("startup", "start-up (yuxi api and yuxi worker)", args, measure)


if __name__ == "__main__":
    raise SystemExit(main())
