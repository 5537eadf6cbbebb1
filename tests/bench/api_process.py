"""The HTTP API as a process of its own, for the API benchmarks.

``uv run yuxi api`` (what an operator runs) with ``YUXI_DATABASE_URL`` pointing at the
benchmark's database and ``YUXI_PORT`` a free port; ``uv`` starts the yuxi Python
process as its child and waits. The server's CPU time and memory are read from /proc for
that Python process alone, so they are not mixed with the benchmark's own.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import psycopg

from tests.bench.harness import _proc_stat, seed_owner
from yuxi.queue.users import new_token, token_hash

HEALTH = "/api/system/health"


# a fixed key for benchmark processes (never a key anything real is sealed with)
BENCH_SECRET_KEY = "eXV4aS1iZW5jaG1hcmstc2VydmVyLWtleS0wMDAwMDA="


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def seed_api_owner(url: str) -> tuple[UUID, str]:
    """The benchmark user and the ``chatbot`` agent (harness.seed_owner), plus an API
    token for that user; returns (uid, token)."""
    uid = seed_owner(url)
    token = new_token()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT yuxi.token_create(%s, %s, 'bench')", (uid, token_hash(token)))
    return uid, token


def add_api_diagnostics(
    parser: argparse.ArgumentParser, *, profile: bool = True, gc_freeze: bool = False
) -> None:
    """The options ``api_process`` implements, for the benchmarks that start an API."""
    parser.add_argument(
        "--api-gc",
        action="store_true",
        help="diagnostic: time the API process's garbage collections (gc.callbacks)",
    )
    if gc_freeze:
        parser.add_argument(
            "--api-gc-freeze",
            action="store_true",
            help="diagnostic what-if: the API process calls gc.freeze() once yuxi is imported",
        )
    if profile:
        parser.add_argument(
            "--profile-api",
            type=Path,
            default=None,
            help="diagnostic: run the API under cProfile, write its stats to this file and"
            " print the top functions (the API is slower so; figures are not comparable)",
        )


@dataclass(frozen=True)
class ProcSample:
    user_seconds: float  # utime so far
    sys_seconds: float  # stime so far
    rss_bytes: int  # resident now
    hwm_bytes: int  # peak resident so far
    wait_seconds: float  # runnable but waiting for a CPU, so far (all threads, schedstat)

    @property
    def cpu_seconds(self) -> float:
        return self.user_seconds + self.sys_seconds


@dataclass
class ApiProcess:
    base_url: str
    launcher_pid: int  # uv
    pid: int  # the yuxi Python process
    command: str
    env: dict[str, str]

    def sample(self) -> ProcSample:
        fields = _proc_stat(Path(f"/proc/{self.pid}/stat"))
        tick = os.sysconf("SC_CLK_TCK")
        status = Path(f"/proc/{self.pid}/status").read_text()
        values = {}
        for line in status.splitlines():
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                values[name] = int(rest.split()[0]) * 1024
        waited = 0
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            with suppress(OSError, IndexError, ValueError):
                waited += int((task / "schedstat").read_text().split()[1])
        return ProcSample(
            int(fields[11]) / tick,
            int(fields[12]) / tick,
            values.get("VmRSS", 0),
            values.get("VmHWM", 0),
            waited / 1e9,
        )

    def describe(self) -> str:
        low = self.env.get("YUXI_POOL_MIN_SIZE", "1")
        pool = f"pool {low}..{self.env.get('YUXI_POOL_MAX_SIZE', '10')}"
        return f"`{self.command}` at {self.base_url}, pid {self.pid} ({pool})"


_GC_TIMER = """import gc, time
_gc = [0.0, 0, 0.0]
def _gc_timer(phase, info):
    if phase == "start":
        _gc[2] = time.perf_counter()
    else:
        _gc[0] += time.perf_counter() - _gc[2]
        _gc[1] += 1
gc.callbacks.append(_gc_timer)
"""


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with suppress(OSError, IndexError):
            if int(_proc_stat(entry / "stat")[1]) == pid:
                found.append(int(entry.name))
    return found


def _yuxi_pid(launcher: int) -> int | None:
    """The Python process running yuxi under ``launcher`` (itself when no uv is used)."""
    pending = [launcher]
    while pending:
        pid = pending.pop()
        with suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if Path(argv[0].decode()).name.startswith("python") and b"yuxi" in b" ".join(argv):
                return pid
        pending.extend(_children(pid))
    return None


@contextmanager
def api_process(
    url: str,
    *,
    pool_max_size: int = 10,
    extra_env: Mapping[str, str] | None = None,
    startup_seconds: float = 60.0,
    profile_to: Path | None = None,
    gc_to: Path | None = None,
    gc_freeze: bool = False,
    command: str = "api",
    preamble: str = "",
    checkout: Path | None = None,
) -> Iterator[ApiProcess]:
    """Serves the API on ``url`` from its own process until the block ends.

    ``command`` is the yuxi command that serves it: ``api`` (the API alone) or ``up``
    (API and worker in one process). ``preamble`` is Python run in that process before
    yuxi's command (``python -c`` then replaces ``yuxi``), e.g. to register a backend.
    ``checkout``: run the yuxi of another checkout (its code and its virtualenv, which
    ``uv sync`` must have made), e.g. an earlier commit to compare with.

    Diagnostics (each runs ``yuxi.cli.main(["api"])`` from ``python -c`` instead): with
    ``profile_to`` the process runs under cProfile and writes its stats there when it
    stops (cProfile slows the process down); with ``gc_to`` it times its garbage
    collections (gc.callbacks) and writes "<seconds> <collections>" there when it stops;
    with ``gc_freeze`` it calls ``gc.freeze()`` once yuxi is imported (a what-if: the
    objects of the imported modules are then left out of every collection)."""
    port = free_port()
    uv = shutil.which("uv")
    command_name = command
    command_line = ["yuxi", command_name]
    shown = ""
    if profile_to is not None or gc_to is not None or gc_freeze or preamble:
        run = f"main([{command_name!r}])"
        if profile_to is not None:
            run = f"import cProfile; cProfile.run({run!r}, {str(profile_to)!r})"
        code = f"import gc\n{preamble}\nfrom yuxi.cli import main\n"
        if gc_freeze:
            code += "gc.freeze()\n"
        labels = [
            ("cProfile", profile_to),
            ("gc timer", gc_to),
            ("gc.freeze()", gc_freeze),
            ("a preamble", preamble),
        ]
        shown = (
            f"python -c <yuxi.cli.main([{command_name!r}]) with "
            + ", ".join(name for name, on in labels if on)
            + ">"
        )
        if gc_to is not None:
            write = f"open({str(gc_to)!r}, 'w').write(f'{{_gc[0]}} {{_gc[1]}}')"
            code = f"{_GC_TIMER}{code}try:\n    {run}\nfinally:\n    {write}\n"
        else:
            code += run
        command_line = ["python", "-c", code]
    argv = [uv, "run", "--no-sync", *command_line] if uv else command_line
    with tempfile.TemporaryDirectory(prefix="yuxi-bench-api-") as home:
        settings = {
            "YUXI_PORT": str(port),
            "YUXI_HOST": "127.0.0.1",
            "YUXI_POOL_MAX_SIZE": str(pool_max_size),
            **(extra_env or {}),
        }
        log_path = Path(home) / "api.log"
        launcher, env = _launch(argv, url, Path(home), settings, log_path, checkout)
        base_url = f"http://127.0.0.1:{port}"
        try:
            pid = _wait_ready(launcher, base_url, startup_seconds, log_path)
            label = ("uv run --no-sync " if uv else "") + (shown or " ".join(command_line))
            yield ApiProcess(base_url, launcher.pid, pid, label, _shown(env))
        finally:
            _stop(launcher)


def _launch(
    argv: list[str],
    url: str,
    home: Path,
    settings: Mapping[str, str],
    log_path: Path,
    checkout: Path | None,
) -> tuple[subprocess.Popen[Any], dict[str, str]]:
    """Starts ``argv`` on the database ``url`` with its home in ``home``, ``settings``
    (``YUXI_*``) on top of this environment, its output to ``log_path``; returns the
    process and the environment it got."""
    env = {
        **os.environ,
        "YUXI_DATABASE_URL": url,
        "YUXI_HOME": str(home),
        "YUXI_LOG_LEVEL": "INFO",  # as shipped: one access line per request, to a file
        # every process of a benchmark shares one server key, as hosts of a database must
        "YUXI_SECRET_KEY": os.environ.get("YUXI_SECRET_KEY") or BENCH_SECRET_KEY,
        **settings,
    }
    env.pop("YUXI_BENCH_DATABASE_URL", None)
    with log_path.open("wb") as log_file:
        launcher = subprocess.Popen(
            argv,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=checkout or Path(__file__).resolve().parents[2],
        )
    return launcher, env


def _shown(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("YUXI_") and k != "YUXI_HOME"}


def _wait_ready(
    launcher: subprocess.Popen[Any], base_url: str, seconds: float, log_path: Path
) -> int:
    deadline = time.monotonic() + seconds
    with httpx.Client(base_url=base_url, timeout=2.0) as probe:
        while True:
            if launcher.poll() is not None:
                raise RuntimeError(
                    f"the API exited with {launcher.returncode}:\n{log_path.read_text()[-4000:]}"
                )
            with suppress(httpx.TransportError):
                if probe.get(HEALTH).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the API did not answer within {seconds:g} s")
            time.sleep(0.05)
    pid = _yuxi_pid(launcher.pid)
    if pid is None:
        raise RuntimeError("cannot find the yuxi process under the launcher")
    return pid


def _stop(launcher: subprocess.Popen[Any]) -> None:
    """SIGTERM to the yuxi process (a clean stop), then to uv; SIGKILL after 20 s."""
    if launcher.poll() is None:
        target = _yuxi_pid(launcher.pid)
        with suppress(ProcessLookupError):
            os.kill(target or launcher.pid, signal.SIGTERM)
        try:
            launcher.wait(timeout=20)
        except subprocess.TimeoutExpired:
            if target is not None:
                with suppress(ProcessLookupError):
                    os.kill(target, signal.SIGKILL)
            launcher.kill()
            launcher.wait()


def mib(value: float) -> str:
    return f"{value / 2**20:,.1f}"


@contextmanager
def worker_process(
    url: str,
    *,
    extra_env: Mapping[str, str] | None = None,
    preamble: str = "",
    checkout: Path | None = None,
) -> Iterator[ApiProcess]:
    """``uv run yuxi worker`` on ``url`` as a process of its own until the block ends
    (``base_url`` is empty: a worker serves no HTTP). Ready once it registered with
    procrastinate (a row in procrastinate_workers)."""
    uv = shutil.which("uv")
    command_line = ["yuxi", "worker"]
    if preamble:
        command_line = ["python", "-c", f"{preamble}\nfrom yuxi.cli import main\nmain(['worker'])"]
    argv = [uv, "run", "--no-sync", *command_line] if uv else command_line
    with tempfile.TemporaryDirectory(prefix="yuxi-bench-worker-") as home:
        log_path = Path(home) / "worker.log"
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM procrastinate_workers").fetchone()
            before = row[0] if row else 0
        launcher, env = _launch(argv, url, Path(home), extra_env or {}, log_path, checkout)
        try:
            deadline = time.monotonic() + 60
            with psycopg.connect(url, autocommit=True) as conn:
                while True:
                    if launcher.poll() is not None:
                        raise RuntimeError(
                            f"the worker exited with {launcher.returncode}:\n"
                            + log_path.read_text()[-4000:]
                        )
                    row = conn.execute("SELECT count(*) FROM procrastinate_workers").fetchone()
                    if row and row[0] > before:
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError("the worker did not register within 60 s")
                    time.sleep(0.05)
            pid = _yuxi_pid(launcher.pid)
            if pid is None:
                raise RuntimeError("cannot find the yuxi process under the launcher")
            label = ("uv run --no-sync " if uv else "") + " ".join(command_line[:2])
            yield ApiProcess("", launcher.pid, pid, label, _shown(env))
        finally:
            _stop(launcher)
