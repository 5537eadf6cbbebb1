"""The LangGraph SDK against yuxi's /lg API: the same workload as a LangGraph-server
user's client, against yuxi's native API on the same server, and against a bare
LangGraph ``ainvoke`` with ``AsyncPostgresSaver`` on the same database.

One ``yuxi up`` (API and worker in one process, default settings) serves both APIs on
a fresh database. The workloads, each through every side:

- **sequential**: --sequential times create a thread, run ``hello`` on it, wait for the
  end (SDK: ``threads.create`` + ``runs.create`` + ``runs.join``; native: ``POST
  /api/chat/thread`` + ``POST /api/agent/runs`` + the run's SSE stream to ``end``;
  floor: one ``ainvoke`` on a new thread id);
- **concurrent**: --runs runs over --threads threads, --in-flight at once, one at a time
  per thread (threads created beforehand, not timed);
- **stateless**: --sequential runs without a thread (SDK: ``runs.wait(None, …)``, on a
  thread of its own that is deleted at its end), against the native and the floor's
  sequential workload again;
- **graph**: --sequential runs (a thread each) on a ``langgraph.json`` project's
  one-node echo graph, served with ``YUXI_GRAPHS``; its floor is the same graph
  ``ainvoke``d;
- **enqueued**: --enqueued runs submitted at once on one thread, then each waited for
  (floor: the same number of ``ainvoke`` one after the other on one thread).

Reported: wall time and runs/s per side and workload, the SDK's runs/s ÷ native's
(target ≥ 0.8) and ÷ the floor's.

    uv run python -m tests.bench.langgraph_sdk [--sequential 100 --runs 200 --threads 50
        --in-flight 20 --enqueued 5]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import httpx
from langgraph_sdk import get_client

from tests.bench.api_process import api_process, seed_api_owner
from tests.bench.harness import BenchDatabase, log, print_table, run_benchmark, verdict
from tests.bench.http_runs import Agent, Floor, load_agent, workload
from yuxi.agents.base import BaseAgent

QUERY = "hello"
REPLY = "echo: hello"
TARGET = 0.8
SAID = {"messages": [{"role": "user", "content": QUERY}]}
# a langgraph.json project of one echo graph, served by `yuxi up` with YUXI_GRAPHS
PROJECT_GRAPH = "echo_graph"
PROJECT_SOURCE = """
from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph


def echo(state: MessagesState) -> dict:
    return {"messages": [AIMessage("echo: " + state["messages"][-1].content)]}


graph = StateGraph(MessagesState).add_node(echo).add_edge(START, "echo").compile()
"""


def write_project(project: str) -> None:
    Path(project, "echo.py").write_text(PROJECT_SOURCE)
    Path(project, "langgraph.json").write_text(
        json.dumps({"graphs": {PROJECT_GRAPH: "./echo.py:graph"}})
    )


def project_agent(project: str) -> Agent:
    """The floor of the graph workload: the project's graph, ainvoked in this process."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_echo_project", Path(project, "echo.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class ProjectGraph(BaseAgent):
        backend_id = PROJECT_GRAPH

        async def get_graph(self, context: Any, *, checkpointer: Any = None) -> Any:
            return module.graph.copy(update={"checkpointer": checkpointer})

    return Agent(PROJECT_GRAPH, ProjectGraph(), "")


class Native:
    """yuxi's own API: submit, then the run's SSE stream to ``end``."""

    def __init__(self, base_url: str, token: str, in_flight: int) -> None:
        limits = httpx.Limits(max_connections=in_flight * 2 + 4)
        self.http = httpx.AsyncClient(
            base_url=base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=120.0,
            limits=limits,
        )

    async def thread(self, agent: str = "chatbot") -> str:
        response = await self.http.post("/api/chat/thread", json={"agent_id": agent})
        response.raise_for_status()
        return str(response.json()["id"])

    async def submit(self, thread: str) -> str:
        response = await self.http.post(
            "/api/agent/runs", json={"thread_id": thread, "query": QUERY}
        )
        response.raise_for_status()
        return str(response.json()["request_id"])

    async def wait(self, request_id: str) -> None:
        view = (await self.http.get(f"/api/agent/requests/{request_id}")).json()
        while view["run_id"] is None:
            async with self.http.stream("GET", f"/api/agent/requests/{request_id}/events") as s:
                async for line in s.aiter_lines():
                    if line.startswith("event: run_created"):
                        break
            view = (await self.http.get(f"/api/agent/requests/{request_id}")).json()
        async with self.http.stream("GET", view["stream_url"]) as stream:
            event = None
            async for line in stream.aiter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line == "" and event == "end":
                    break
        result = (await self.http.get(f"/api/agent/runs/{view['run_id']}/result")).json()
        if result["output"] != REPLY:
            raise RuntimeError(f"native run replied {result}")

    async def run(self, thread: str) -> None:
        await self.wait(await self.submit(thread))

    async def aclose(self) -> None:
        await self.http.aclose()


class Sdk:
    """The official LangGraph SDK against /lg."""

    def __init__(self, base_url: str, token: str) -> None:
        self.client = get_client(url=f"{base_url}/lg", api_key=token)

    async def thread(self) -> str:
        return str((await self.client.threads.create())["thread_id"])

    async def submit(self, thread: str, assistant: str = "chatbot") -> str:
        run = await self.client.runs.create(thread, assistant, input=SAID)
        return str(run["run_id"])

    async def wait(self, thread: str, run_id: str) -> None:
        values = await self.client.runs.join(thread, run_id)
        if values["messages"][-1]["content"] != REPLY:
            raise RuntimeError(f"sdk run replied {values['messages'][-1]}")

    async def run(self, thread: str, assistant: str = "chatbot") -> None:
        await self.wait(thread, await self.submit(thread, assistant))

    async def stateless(self) -> None:
        """A run without a thread: on a thread of its own, deleted at its end."""
        values = await self.client.runs.wait(None, "chatbot", input=SAID)
        if values["messages"][-1]["content"] != REPLY:
            raise RuntimeError(f"stateless run replied {values}")

    async def aclose(self) -> None:
        await self.client.aclose()


async def timed(action: Callable[[], Awaitable[None]]) -> float:
    start = time.perf_counter()
    await action()
    return time.perf_counter() - start


async def sides_for(
    args: argparse.Namespace, native: Native, sdk: Sdk, floor: Floor, project_floor: Floor
) -> dict[str, dict[str, float]]:
    seconds: dict[str, dict[str, float]] = {"sdk": {}, "native": {}, "floor": {}}

    async def seq_sdk() -> None:
        for _ in range(args.sequential):
            await sdk.run(await sdk.thread())

    async def seq_native() -> None:
        for _ in range(args.sequential):
            await native.run(await native.thread())

    async def seq_floor() -> None:
        for _ in range(args.sequential):
            await floor.run(uuid4())

    log("sequential")
    seconds["sdk"]["sequential"] = await timed(seq_sdk)
    seconds["native"]["sequential"] = await timed(seq_native)
    seconds["floor"]["sequential"] = await timed(seq_floor)

    log("stateless")

    async def stateless_sdk() -> None:
        for _ in range(args.sequential):
            await sdk.stateless()

    seconds["sdk"]["stateless"] = await timed(stateless_sdk)
    seconds["native"]["stateless"] = await timed(seq_native)
    seconds["floor"]["stateless"] = await timed(seq_floor)

    log("graph (a langgraph.json project's echo graph)")

    async def graph_sdk() -> None:
        for _ in range(args.sequential):
            await sdk.run(await sdk.thread(), PROJECT_GRAPH)

    async def graph_native() -> None:
        for _ in range(args.sequential):
            await native.run(await native.thread(PROJECT_GRAPH))

    async def graph_floor() -> None:
        for _ in range(args.sequential):
            await project_floor.run(uuid4())

    seconds["sdk"]["graph"] = await timed(graph_sdk)
    seconds["native"]["graph"] = await timed(graph_native)
    seconds["floor"]["graph"] = await timed(graph_floor)

    log("concurrent")
    sdk_threads = [UUID(await sdk.thread()) for _ in range(args.threads)]
    native_threads = [UUID(await native.thread()) for _ in range(args.threads)]
    floor_threads = [uuid4() for _ in range(args.threads)]

    async def sdk_once(thread: UUID) -> None:
        await sdk.run(str(thread))

    async def native_once(thread: UUID) -> None:
        await native.run(str(thread))

    async def floor_once(thread: UUID) -> None:
        await floor.run(thread)

    seconds["sdk"]["concurrent"] = await timed(
        lambda: workload(sdk_threads, args.runs, args.in_flight, sdk_once)
    )
    seconds["native"]["concurrent"] = await timed(
        lambda: workload(native_threads, args.runs, args.in_flight, native_once)
    )
    seconds["floor"]["concurrent"] = await timed(
        lambda: workload(floor_threads, args.runs, args.in_flight, floor_once)
    )

    log("enqueued")

    async def enq_sdk() -> None:
        thread = await sdk.thread()
        runs = [await sdk.submit(thread) for _ in range(args.enqueued)]
        for run in runs:
            await sdk.wait(thread, run)

    async def enq_native() -> None:
        thread = await native.thread()
        requests = [await native.submit(thread) for _ in range(args.enqueued)]
        for request in requests:
            await native.wait(request)

    async def enq_floor() -> None:
        thread = uuid4()
        for _ in range(args.enqueued):
            await floor.run(thread)

    seconds["sdk"]["enqueued"] = await timed(enq_sdk)
    seconds["native"]["enqueued"] = await timed(enq_native)
    seconds["floor"]["enqueued"] = await timed(enq_floor)
    return seconds


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    _uid, token = seed_api_owner(database.url)
    agent = load_agent(None)
    counts = {
        "sequential": args.sequential,
        "stateless": args.sequential,
        "graph": args.sequential,
        "concurrent": args.runs,
        "enqueued": args.enqueued,
    }
    with (
        tempfile.TemporaryDirectory(prefix="yuxi-bench-floor-") as workdir,
        tempfile.TemporaryDirectory(prefix="yuxi-bench-project-") as project,
    ):
        write_project(project)
        with api_process(database.url, command="up", extra_env={"YUXI_GRAPHS": project}) as process:
            log(f"serving: {process.describe()}")
            native = Native(process.base_url, token, args.in_flight)
            sdk = Sdk(process.base_url, token)
            floor = Floor(agent, database.url, args.in_flight, workdir)
            project_floor = Floor(project_agent(project), database.url, args.in_flight, workdir)
            try:
                # warm-up, not counted
                await sdk.run(await sdk.thread())
                await native.run(await native.thread())
                await sdk.run(await sdk.thread(), PROJECT_GRAPH)
                async with floor.compiled(), project_floor.compiled():
                    await floor.run(uuid4())
                    await project_floor.run(uuid4())
                    seconds = await sides_for(args, native, sdk, floor, project_floor)
            finally:
                await native.aclose()
                await sdk.aclose()
    rows: list[list[Any]] = []
    ok = True
    for name, count in counts.items():
        rate = {side: count / seconds[side][name] for side in seconds}
        ratio = rate["sdk"] / rate["native"]
        ok = ok and ratio >= TARGET
        rows.append(
            [
                name,
                count,
                f"{rate['sdk']:.1f}",
                f"{rate['native']:.1f}",
                f"{rate['floor']:.1f}",
                f"{ratio:.2f} {verdict(ratio >= TARGET)}",
                f"{rate['sdk'] / rate['floor']:.2f}",
            ]
        )
    print_table(
        "runs/s per side (sdk: langgraph_sdk on /lg; native: /api; floor: bare ainvoke)",
        ["workload", "runs", "sdk", "native", "floor", f"sdk/native (≥{TARGET})", "sdk/floor"],
        rows,
    )
    return 0 if ok else 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sequential", type=int, default=100)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--in-flight", type=int, default=20)
    parser.add_argument("--enqueued", type=int, default=5)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_benchmark("langgraph_sdk", "langgraph_sdk", args, measure)


if __name__ == "__main__":
    raise SystemExit(main())
