"""The memory tools over real HTTP with a real worker: offered to a main agent only, and
only with memory text and enable_memory; a subagent gets neither the text nor the tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.api.conftest import Api
from yuxi.agents.chatbot import ChatBotContext
from yuxi.agents.graph import build_agent_graph
from yuxi.agents.subagent import SubAgentContext

pytestmark = pytest.mark.asyncio(loop_scope="module")

FILES = "/api/workspace/files"
MEMORY_TOOLS = {"memory_read", "memory_append", "memory_replace_section"}


@pytest_asyncio.fixture(scope="module", loop_scope="module", autouse=True)
async def agents(api: Api, worker: None) -> None:
    """``rememberer``: a chatbot with enable_memory; ``mem-helper``: a subagent with
    enable_memory."""
    bodies: list[dict[str, Any]] = [
        {"slug": "rememberer", "backend_id": "chatbot", "enable_memory": True},
        {"slug": "mem-helper", "backend_id": "subagent", "enable_memory": True},
    ]
    for body in bodies:
        context = {"model": "builtin:scripted", "enable_memory": body["enable_memory"]}
        response = await api.admin.post(
            "/api/agents",
            json={
                "slug": body["slug"],
                "name": body["slug"],
                "backend_id": body["backend_id"],
                "is_subagent": body["backend_id"] == "subagent",
                "config": {"context": context},
            },
        )
        assert response.status_code == 201, response.text


async def reply(api: Api, query: str, agent: str = "rememberer") -> tuple[str, str]:
    """(thread id, the run's final answer) of one message in a new conversation."""
    thread = await api.thread(agent=agent)
    run = await api.submit(thread, query)
    await api.completed(run["run_id"])
    return thread, str((await api.result(run["run_id"]))["output"])


def task(subagent: str, description: str) -> str:
    return "/tool task " + json.dumps({"subagent": subagent, "description": description})


async def put_memory(api: Api, text: str) -> Path:
    response = await api.alice.put(f"{FILES}/agents/MEMORY.md", content=text.encode())
    assert response.status_code == 200, response.text
    return api.home / "workspaces" / str(api.uids["alice"]) / "agents" / "MEMORY.md"


# -- which graphs offer the memory tools ------------------------------------------------


def offered(context: ChatBotContext | SubAgentContext) -> set[str]:
    graph = build_agent_graph(context, checkpointer=None)
    return set(graph.nodes["tools"].bound.tools_by_name)  # type: ignore[attr-defined]


async def test_the_memory_tools_are_offered_only_to_a_main_agent_with_memory_text() -> None:
    def chatbot(**fields: Any) -> ChatBotContext:
        return ChatBotContext(model="builtin:scripted", tools=["calculator"], **fields)

    plain = {"calculator", "ask_user", "write_todos"}
    assert offered(chatbot(enable_memory=True, memory="notes")) == plain | MEMORY_TOOLS
    assert offered(chatbot()) == plain
    for context in (
        chatbot(enable_memory=True, memory=""),
        chatbot(enable_memory=False, memory="notes"),
        SubAgentContext(
            model="builtin:scripted", tools=["calculator"], enable_memory=True, memory="notes"
        ),
    ):
        assert offered(context) == plain, context


# -- memory in real runs ----------------------------------------------------------------


async def test_the_main_agent_appends_to_its_users_memory(api: Api) -> None:
    path = await put_memory(api, "# Memory\n\n## Preferences\n- tea\n")
    _, answer = await reply(api, '/tool memory_append {"text": "- has a cat"}')
    size = len("# Memory\n\n## Preferences\n- tea\n\n- has a cat\n")
    assert answer == f"tool memory_append returned: appended to agents/MEMORY.md ({size} bytes now)"
    assert path.read_text() == "# Memory\n\n## Preferences\n- tea\n\n- has a cat\n"
    query = '/tool memory_replace_section {"heading": "Preferences", "content": "- coffee"}'
    _, answer = await reply(api, query)
    assert answer.startswith("tool memory_replace_section returned: replaced section")
    assert path.read_text() == "# Memory\n\n## Preferences\n\n- coffee\n"
    _, answer = await reply(api, "/tool memory_read {}")
    assert answer == "tool memory_read returned: # Memory\n\n## Preferences\n\n- coffee\n"
    # the same file through the API
    assert (await api.alice.get(f"{FILES}/agents/MEMORY.md")).text == path.read_text()


async def test_no_memory_tools_without_memory_text_or_enable_memory(api: Api) -> None:
    for text in ("", "<!-- only a note for me -->\n"):
        path = await put_memory(api, text)
        _, answer = await reply(api, '/tool memory_append {"text": "x"}')
        assert answer == "tool memory_append is not available"
        assert path.read_text() == text
    path = await put_memory(api, "notes\n")
    # the chatbot agent does not set enable_memory
    _, answer = await reply(api, '/tool memory_append {"text": "x"}', agent="chatbot")
    assert answer == "tool memory_append is not available"
    assert path.read_text() == "notes\n"


async def test_a_subagent_with_enable_memory_gets_no_memory_tools(api: Api) -> None:
    path = await put_memory(api, "notes\n")
    _, answer = await reply(api, task("mem-helper", '/tool memory_append {"text": "x"}'))
    assert answer == "tool task returned: tool memory_append is not available"
    assert path.read_text() == "notes\n"


async def test_in_ask_mode_a_memory_edit_waits_for_approval(api: Api) -> None:
    path = await put_memory(api, "notes\n")
    thread = await api.thread(agent="rememberer")
    run = await api.submit(
        thread, '/tool memory_append {"text": "approved"}', tool_approval_mode="ask"
    )
    assert (await api.wait_run(run["run_id"]))["status"] == "interrupted"
    assert path.read_text() == "notes\n"
    response = await api.alice.post(
        f"/api/agent/runs/{run['run_id']}/resume", json={"resume": {"decision": "approve"}}
    )
    assert response.status_code == 202, response.text
    resumed = response.json()["run_id"]
    await api.completed(resumed)
    assert path.read_text() == "notes\n\napproved\n"
