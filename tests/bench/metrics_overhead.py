"""The cost of HTTP metrics on the API's request path: submits per second through an API
that counts its requests (yuxi/api/metrics.py's HttpMetrics, as shipped) against the
same API without it.

Two API processes on one database, started alike (``yuxi.cli.main(["api"])`` from
``python -c``, default pool of 10 connections, access log on as shipped); the baseline's
``create_app`` is called with ``count_requests=False``, which leaves the middleware out
and changes nothing else. --concurrency client tasks in this process, each with an
httpx client and keep-alive connection of its own, send ``POST /api/agent/runs`` back to
back, each to a fresh idle conversation (so every submit dispatches a run), and check
each answer is 202 with a dispatched run. No worker runs.

Measured side by side: --rounds windows of --seconds on each API, alternating (ABBA);
short windows and many rounds, so that other load on the machine, which comes and goes
over seconds, falls on both sides alike. Also shown: the median of the rounds' ratios,
and each API process's CPU per submit (from /proc), which other load on the
machine skews less than the rate. Afterwards, the counted API's /metrics must show every
submit it answered under ``route="/api/agent/runs"``.

Also measured, in this process: the middleware's own cost per request, HttpMetrics
around a trivial ASGI app against the app alone (--micro-requests each, alternating in
blocks), next to the API's CPU per submit.

Target: metrics/baseline submits/s ≥ 0.97.

    uv run python -m tests.bench.metrics_overhead [--seconds 2] [--concurrency 8] [--rounds 60]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.bench.api_overhead import Side, Threads, http_client, http_submit, timed_window
from tests.bench.api_process import ApiProcess, api_process, seed_api_owner
from tests.bench.harness import (
    BenchDatabase,
    log,
    percentile,
    print_table,
    run_benchmark,
    settle,
    verdict,
)
from yuxi.api.metrics import HttpMetrics

TARGET = 0.97

# both sides import yuxi.api.app before serve_api's gc.freeze(), so that the two
# processes freeze the same objects
PREAMBLE = """import functools
import yuxi.api.app
yuxi.api.app.create_app = functools.partial(yuxi.api.app.create_app, count_requests={count})
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.metrics_overhead",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="window per side and round")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent submitters")
    parser.add_argument("--rounds", type=int, default=60, help="alternating rounds of both sides")
    parser.add_argument(
        "--window-threads",
        type=int,
        default=6_000,
        help="fresh conversations made ready (untimed) before each window, one per submit",
    )
    parser.add_argument(
        "--micro-requests", type=int, default=200_000, help="in-process requests per side"
    )
    return parser.parse_args(argv)


@contextmanager
def api(url: str, *, count_requests: bool) -> Iterator[ApiProcess]:
    """``yuxi api`` on ``url`` in a process of its own, with or without HTTP metrics."""
    with api_process(url, preamble=PREAMBLE.format(count=count_requests)) as process:
        yield process


def counted_submits(api_process: ApiProcess) -> float:
    """The 202s the API's own metrics counted under the submit route."""
    response = httpx.get(f"{api_process.base_url}/metrics", timeout=10.0)
    response.raise_for_status()
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == "yuxi_http_requests_total" and sample.labels == {
                "method": "POST",
                "route": "/api/agent/runs",
                "status": "202",
            }:
                return float(sample.value)
    return 0.0


async def _trivial_app(scope: Any, receive: Any, send: Any) -> None:
    scope["path_template"] = "/api/agent/runs"  # what Litestar's router sets
    await send({"type": "http.response.start", "status": 202, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


async def middleware_cost(requests: int) -> tuple[float, float]:
    """Microseconds of CPU per request: the trivial app alone, and inside HttpMetrics."""
    wrapped = HttpMetrics(_trivial_app)  # type: ignore[arg-type]

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        return None

    def scope() -> dict[str, Any]:
        return {"type": "http", "method": "POST", "path": "/api/agent/runs"}

    spent = {"bare": 0.0, "wrapped": 0.0}
    block = 10_000
    for start in range(0, requests, block):
        for label, app in (("bare", _trivial_app), ("wrapped", wrapped)):
            began = time.process_time()
            for _ in range(min(block, requests - start)):
                await app(scope(), receive, send)
            spent[label] += time.process_time() - began
    return spent["bare"] / requests * 1e6, spent["wrapped"] / requests * 1e6


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    url = database.url
    uid, token = seed_api_owner(url)
    threads = Threads(url, uid)
    threads.top_up(args.window_threads)
    settle(url)
    with ExitStack() as stack:
        apis = {
            "metrics": stack.enter_context(api(url, count_requests=True)),
            "baseline": stack.enter_context(api(url, count_requests=False)),
        }
        for label, process in apis.items():
            log(f"{label}: {process.command} at {process.base_url}, pid {process.pid}")
        sides = {label: Side(label) for label in apis}
        clients = {
            label: [http_client(process, token) for _ in range(args.concurrency)]
            for label, process in apis.items()
        }

        def work(label: str) -> Any:
            async def submitter(index: int, deadline: float, latencies: list[float]) -> int:
                done = 0
                while time.perf_counter() < deadline:
                    sent = time.perf_counter()
                    await http_submit(clients[label][index], threads.next())
                    latencies.append(time.perf_counter() - sent)
                    done += 1
                return done

            return submitter

        try:
            for label in apis:  # open each keep-alive connection and warm up before timing
                for client in clients[label]:
                    await client.get("/api/system/health")
                    await http_submit(client, threads.next())
            for round_no in range(args.rounds):
                order = ["metrics", "baseline"] if round_no % 2 == 0 else ["baseline", "metrics"]
                for label in order:
                    threads.top_up(args.window_threads)
                    settle(url)
                    await timed_window(
                        url, apis[label], sides[label], args.concurrency, args.seconds, work(label)
                    )
                    log(f"round {round_no + 1}: {label}: {sides[label].rounds[-1]:,.0f} submits/s")
        finally:
            for group in clients.values():
                for client in group:
                    await client.aclose()
        counted = counted_submits(apis["metrics"])

    bare_us, wrapped_us = await middleware_cost(args.micro_requests)

    metrics, baseline = sides["metrics"], sides["baseline"]
    ratio = metrics.rate / baseline.rate if baseline.rate else 0.0
    print_table(
        f"Submits/s over {args.rounds} x {args.seconds:g} s per side, {args.concurrency}"
        " concurrent submitters, each submit on a fresh conversation",
        [
            "side",
            "submits",
            "submits/s",
            "rounds min-max",
            "p50 ms",
            "p99 ms",
            "API cpu ms/submit",
            "server cpu ms/submit",
            "vs baseline",
        ],
        [
            [
                side.label,
                f"{side.items:,}",
                f"{side.rate:,.0f}",
                f"{min(side.rounds):,.0f}-{max(side.rounds):,.0f}",
                f"{percentile(side.latencies, 0.5) * 1000:.2f}",
                f"{percentile(side.latencies, 0.99) * 1000:.2f}",
                side.per_item_ms(side.api_cpu),
                side.per_item_ms(side.server_cpu),
                f"{side.rate / baseline.rate:.3f}" if baseline.rate else "-",
            ]
            for side in (metrics, baseline)
        ],
    )
    extra_us = wrapped_us - bare_us
    api_us = baseline.api_cpu / baseline.items * 1e6 if baseline.items else float("nan")
    print(
        f"\nIn process, {args.micro_requests:,} requests per side: a trivial ASGI app"
        f" {bare_us:.1f} us of CPU per request, inside HttpMetrics {wrapped_us:.1f} us:"
        f" +{extra_us:.1f} us per request, {extra_us / api_us:.2%} of the baseline API's"
        f" {api_us:,.0f} us of CPU per submit"
    )
    paired = statistics.median(
        m / b for m, b in zip(metrics.rounds, baseline.rounds, strict=True) if b
    )
    print(f"  median of the {args.rounds} rounds' metrics/baseline ratios: {paired:.3f}")
    # the warm-up submits are counted too
    expected = metrics.items + args.concurrency
    counted_ok = counted == expected
    if not counted_ok:
        print(
            f"  CHECK FAILED: /metrics counted {counted:.0f} submits, the API answered {expected}"
        )
    ok = ratio >= TARGET and counted_ok
    print(
        f"\nTarget: metrics/baseline >= {TARGET}. {ratio:.3f}x ({metrics.rate:,.0f} vs"
        f" {baseline.rate:,.0f} submits/s); /metrics counted every submit: {counted_ok}:"
        f" {verdict(ok)}"
    )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    return run_benchmark(
        "metrics_overhead",
        "metrics_overhead (POST /api/agent/runs with and without HTTP metrics)",
        parse_args(argv),
        measure,
    )


if __name__ == "__main__":
    raise SystemExit(main())
