"""A langgraph.json project's graphs served as agents (``YUXI_GRAPHS``): the example
project of examples/langgraph_project plus a factory graph without messages and a graph
that cannot be imported, through the official SDK and the native API, on one server and
one worker."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from langgraph_sdk.errors import UnprocessableEntityError

from tests.api.log_capture import Capture, capturing
from tests.integration.worker_harness import running_worker
from tests.lg.conftest import Api, Clients
from yuxi.agents.graphs import unregister_project

pytestmark = pytest.mark.asyncio(loop_scope="module")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_project"

# a factory (taking the run's config) that returns an uncompiled StateGraph whose state
# has no messages, with a context schema
TALLY = """
from dataclasses import dataclass
from typing_extensions import TypedDict

from langgraph.graph import START, StateGraph


class Tally(TypedDict, total=False):
    items: list[str]
    total: int


@dataclass
class Units:
    unit: str = "item"


def count(state: Tally) -> dict:
    return {"total": len(state.get("items", []))}


def make_graph(config):
    assert "configurable" in config
    return StateGraph(Tally, context_schema=Units).add_node(count).add_edge(START, "count")
"""
BROKEN = "import yuxi_missing_dependency_xyz\n\ngraph = None\n"
# an async factory taking a ServerRuntime, as langgraph-api >= 0.7.31 calls it
BUILT = """
from langgraph.graph import START, MessagesState, StateGraph
from langgraph_sdk.runtime import ServerRuntime


async def make_graph(runtime: ServerRuntime):
    built_for = runtime.access_context

    def answer(state: MessagesState) -> dict:
        return {"messages": [("ai", f"built for {built_for}")]}

    return StateGraph(MessagesState).add_node(answer).add_edge(START, "answer").compile()
"""


@pytest.fixture(scope="module", autouse=True)
def project(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Path]:
    """The example project with two more graphs; autouse, so that it exists before the
    ``api`` fixture reads this module's API_SETTINGS."""
    root = tmp_path_factory.mktemp("lg-project") / "project"
    shutil.copytree(EXAMPLE, root)
    (root / "tally.py").write_text(TALLY)
    (root / "broken.py").write_text(BROKEN)
    (root / "built.py").write_text(BUILT)
    config = json.loads((root / "langgraph.json").read_text())
    config["graphs"] |= {
        "tally": "./tally.py:make_graph",
        "broken": "./broken.py:graph",
        "built": "./built.py:make_graph",
    }
    (root / "langgraph.json").write_text(json.dumps(config))
    request.module.API_SETTINGS = {"graphs": root}
    try:
        yield root
    finally:
        unregister_project(root)
        os.environ.pop("APPROVAL_SIGNATURE", None)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def worker(api: Api, project: Path) -> AsyncIterator[Capture]:
    """A worker of the same project; what it logs from its start."""
    with capturing() as capture:
        async with running_worker(api.db_url, api.home, worker_concurrency=4, graphs=project):
            yield capture


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def test_graphs_are_assistants_with_their_own_schemas(sdk: Clients) -> None:
    for client in (sdk.alice, sdk.bob):  # visible to every user, like the built-in agents
        found = {a["graph_id"] for a in await client.assistants.search(limit=100)}
        assert {"chatbot", "memory", "approval", "tally", "broken", "built"} <= found
    approval = await sdk.alice.assistants.get("approval")
    assert approval["metadata"]["backend_id"] == "approval"
    assert approval["description"] == "Drafts a post and publishes it once a person approves"

    schemas = await sdk.alice.assistants.get_schemas("approval")
    assert "messages" in schemas["input_schema"]["properties"]
    assert "messages" in schemas["state_schema"]["properties"]
    # no context schema of its own: yuxi's per-run settings
    assert "tool_approval_mode" in schemas["context_schema"]["properties"]
    tally = await sdk.alice.assistants.get_schemas("tally")
    assert set(tally["input_schema"]["properties"]) == {"items", "total"}
    assert set(tally["output_schema"]["properties"]) == {"items", "total"}
    assert tally["context_schema"]["properties"]["unit"]["default"] == "item"
    built = await sdk.alice.assistants.get_schemas("built")  # the factory, for reading
    assert "messages" in built["input_schema"]["properties"]

    with pytest.raises(UnprocessableEntityError) as refused:
        await sdk.alice.assistants.get_schemas("broken")
    assert "yuxi_missing_dependency_xyz" in str(refused.value.body)


async def test_the_interrupt_graph_is_resumed_with_a_command(sdk: Clients, worker: Capture) -> None:
    thread = (await sdk.alice.threads.create())["thread_id"]
    values = await sdk.alice.runs.wait(thread, "approval", input=said("launch day"))
    (pending,) = values["__interrupt__"]
    assert pending["value"]["question"] == "Publish 'Draft: launch day'? (yes/no)"
    assert (await sdk.alice.threads.get(thread))["status"] == "interrupted"

    values = await sdk.alice.runs.wait(thread, "approval", command={"resume": "yes"})
    # APPROVAL_SIGNATURE comes from the project's .env
    assert values["messages"][-1]["content"] == "Published: Draft: launch day -- the approval graph"
    assert [m["type"] for m in values["messages"]] == ["human", "ai", "ai"]
    assert (await sdk.alice.threads.get(thread))["status"] == "idle"


async def test_a_graph_without_messages_runs_and_shows_its_values(
    sdk: Clients, worker: Capture
) -> None:
    thread = (await sdk.alice.threads.create())["thread_id"]
    values = await sdk.alice.runs.wait(thread, "tally", input=said('{"items": ["a", "b", "c"]}'))
    assert values["total"] == 3, values
    state = await sdk.alice.threads.get_state(thread)
    assert state["values"] == {"items": ["a", "b", "c"], "total": 3}
    (run,) = await sdk.alice.runs.list(thread)
    assert run["status"] == "success"
    # the graph's own input keys, as a LangGraph client sends them
    values = await sdk.alice.runs.wait(thread, "tally", input={"items": ["x", "y"]})
    assert values["total"] == 2, values
    chat = (await sdk.alice.threads.create())["thread_id"]
    with pytest.raises(UnprocessableEntityError):  # a yuxi agent's state is its messages
        await sdk.alice.runs.create(chat, "chatbot", input={"items": ["x"]})

    other = (await sdk.alice.threads.create())["thread_id"]
    values = await sdk.alice.runs.wait(
        other, "tally", input=said("three things"), raise_error=False
    )
    assert values["__error__"]["error"] == "GraphInputError"
    assert "as a JSON object" in values["__error__"]["message"]


async def test_a_graph_that_cannot_be_imported_fails_only_its_runs(
    api: Api, sdk: Clients, worker: Capture, project: Path
) -> None:
    thread = (await sdk.alice.threads.create())["thread_id"]
    values = await sdk.alice.runs.wait(thread, "broken", input=said("hello"), raise_error=False)
    error = values["__error__"]
    assert error["error"] == "GraphLoadError"
    assert "No module named 'yuxi_missing_dependency_xyz'" in error["message"]
    assert "not installed" in error["message"]
    assert str(project) not in error["message"] and str(api.home) not in error["message"]

    # the other graphs and the built-in agents keep working
    chat = (await sdk.alice.threads.create())["thread_id"]
    values = await sdk.alice.runs.wait(chat, "chatbot", input=said("still here"))
    assert values["messages"][-1]["content"] == "echo: still here"
    built = (await sdk.alice.threads.create())["thread_id"]
    parts = [
        part
        async for part in sdk.alice.runs.stream(
            built, "built", input=said("hi"), stream_mode="messages-tuple"
        )
    ]
    texts = [p.data[0]["content"] for p in parts if p.event == "messages"]
    assert "".join(texts) == "built for threads.create_run", parts

    # the worker's start imported every graph and logged the one that failed
    deadline = time.monotonic() + 10
    while not any(
        r.name == "yuxi.agents.graphs" and r.getMessage().startswith("graph 'broken'")
        for r in worker.records
    ):
        assert time.monotonic() < deadline, "the broken graph was not logged at start"
        await asyncio.sleep(0.05)
    assert any(
        r.getMessage() == "graphs loaded: memory, approval, tally, built" for r in worker.records
    )


async def test_the_memory_graph_asks_the_store(sdk: Clients, worker: Capture) -> None:
    """A project graph's get_store() is LangGraph's store, in the run user's namespaces:
    what alice said on one thread is remembered on another, never shown to bob."""
    first = (await sdk.alice.threads.create())["thread_id"]
    values = await sdk.alice.runs.wait(first, "memory", input=said("I like tea"))
    assert values["messages"][-1]["content"] == "I remember: I like tea", values
    second = (await sdk.alice.threads.create())["thread_id"]
    values = await sdk.alice.runs.wait(second, "memory", input=said("I like rain"))
    assert values["messages"][-1]["content"] == "I remember: I like rain; I like tea"
    theirs = (await sdk.bob.threads.create())["thread_id"]
    values = await sdk.bob.runs.wait(theirs, "memory", input=said("I like snow"))
    assert values["messages"][-1]["content"] == "I remember: I like snow"


async def test_a_graph_through_the_native_api(api: Api, worker: Capture) -> None:
    agent = await api.alice.get("/api/agents/approval")
    assert agent.status_code == 200 and agent.json()["backend_id"] == "approval", agent.text
    thread = await api.thread(agent="approval")
    run = await api.submit(thread, "the release notes")
    assert (await api.wait_run(run["run_id"]))["status"] == "interrupted"
    state = (await api.alice.get(f"/api/chat/thread/{thread}/state")).json()
    assert state["interrupt"] is not None, state
    response = await api.alice.post(
        f"/api/agent/runs/{run['run_id']}/resume", json={"resume": "not today"}
    )
    assert response.status_code == 202, response.text
    resumed = await api.completed(response.json()["run_id"])
    result = await api.result(resumed["run_id"])
    assert result["output"] == "Discarded (not today)", result
    history = await api.history(thread)
    assert [m["content"] for m in history["history"] if m["role"] == "assistant"] == [
        "Draft: the release notes",
        "Discarded (not today)",
    ]
