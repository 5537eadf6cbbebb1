"""Restarts: how fast the CLI answers, a new API becomes healthy, and an API with open
streams exits on SIGTERM — what an operator's rolling restart costs the clients.

- ``yuxi --help`` and ``yuxi user list --help``: wall time of the process (target < 0.5 s).
- ``yuxi api`` start: from spawning the process to the first 200 of
  ``/api/system/health`` (target < 2 s).
- SIGTERM with --streams SSE clients following a pending run (no worker, so the streams
  would otherwise wait forever) and one following its request: from the signal to the
  process's exit (target < 2 s); every stream must end with a ``retry:`` hint.

Each figure is the median of --repeat tries, with the worst shown too.

    uv run python -m tests.bench.restarts [--repeat 5] [--streams 24]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.bench.api_process import free_port, seed_api_owner
from tests.bench.harness import BenchDatabase, log, print_table, run_benchmark, verdict

TARGETS = {"help": 0.5, "healthy": 2.0, "exit": 2.0}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="tries of each measurement")
    parser.add_argument("--streams", type=int, default=24, help="open SSE streams at SIGTERM")
    return parser.parse_args(argv)


def yuxi_command() -> list[str]:
    # the installed script, as `uv run yuxi` runs it (without uv's own startup)
    return [str(Path(sys.executable).with_name("yuxi"))]


def timed_help(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([*yuxi_command(), *args], check=True, capture_output=True, timeout=60)
    return time.perf_counter() - started


async def start_api(env: dict[str, str], port: int) -> tuple[subprocess.Popen[bytes], float]:
    started = time.perf_counter()
    process = subprocess.Popen(  # noqa: ASYNC220 - the spawn is part of what is timed
        [*yuxi_command(), "api"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=2) as probe:
        while True:
            try:
                if (await probe.get("/api/system/health")).status_code == 200:
                    return process, time.perf_counter() - started
            except httpx.TransportError:
                pass
            if process.poll() is not None:
                raise RuntimeError("yuxi api exited during startup")
            await asyncio.sleep(0.01)


async def sigterm_with_streams(
    process: subprocess.Popen[bytes], port: int, token: str, streams: int
) -> tuple[float, int]:
    """Seconds from SIGTERM to exit, and how many streams ended with a retry hint."""
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
        thread = (await client.post("/api/chat/thread", json={"agent_id": "chatbot"})).json()
        info = (
            await client.post("/api/agent/runs", json={"thread_id": thread["id"], "query": "x"})
        ).json()
        paths = [f"/api/agent/runs/{info['run_id']}/events"] * streams
        paths.append(f"/api/agent/requests/{info['request_id']}/events")
        opened = asyncio.Semaphore(0)

        async def follow(path: str) -> str:
            async with client.stream("GET", path) as response:
                opened.release()
                return "".join([piece async for piece in response.aiter_text()])

        tasks = [asyncio.create_task(follow(path)) for path in paths]
        for _ in paths:
            await opened.acquire()
        await asyncio.sleep(0.2)
        started = time.perf_counter()
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 60)
        elapsed = time.perf_counter() - started
        bodies = await asyncio.gather(*tasks, return_exceptions=True)
    hinted = sum(1 for b in bodies if isinstance(b, str) and "retry: " in b.replace("\r\n", "\n"))
    return elapsed, hinted


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    _uid, token = seed_api_owner(database.url)
    helps = [timed_help(["--help"]) for _ in range(args.repeat)]
    helps += [timed_help(["user", "list", "--help"]) for _ in range(args.repeat)]
    healthy: list[float] = []
    exits: list[float] = []
    hinted_all = True
    with tempfile.TemporaryDirectory(prefix="yuxi-bench-restarts-") as home:
        for attempt in range(args.repeat):
            port = free_port()
            env = {
                **os.environ,
                "YUXI_HOME": home,
                "YUXI_DATABASE_URL": database.url,
                "YUXI_PORT": str(port),
                "YUXI_LOG_LEVEL": "WARNING",
            }
            process, seconds = await start_api(env, port)
            healthy.append(seconds)
            elapsed, hinted = await sigterm_with_streams(process, port, token, args.streams)
            exits.append(elapsed)
            hinted_all &= hinted == args.streams + 1
            log(
                f"try {attempt + 1}: healthy {seconds:.2f} s, exit {elapsed:.2f} s, {hinted} hinted"
            )
    rows = []
    ok = hinted_all
    for name, values, label in (
        ("help", helps, "yuxi --help / yuxi user list --help"),
        ("healthy", healthy, "yuxi api: spawn -> health 200"),
        ("exit", exits, f"SIGTERM -> exit, {args.streams}+1 open streams"),
    ):
        median = statistics.median(values)
        passed = median < TARGETS[name]
        ok &= passed
        rows.append(
            (label, f"{median:.2f}", f"{max(values):.2f}", f"< {TARGETS[name]}", verdict(passed))
        )
    print_table("Restarts (seconds)", ("what", "p50", "max", "target", "verdict"), rows)
    print(f"  every stream ended with a retry hint: {verdict(hinted_all)}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_benchmark(
        "restarts", "restarts (CLI start, API start, SIGTERM with streams)", args, measure
    )


if __name__ == "__main__":
    raise SystemExit(main())
