"""/lg through the JS LangGraph SDK (@langchain/langgraph-sdk, pinned in tests/js/),
with the request bodies agent-chat-ui's useStream sends (tests/js/agent_chat_ui.mjs):
a message, a regenerate, a resume after ``/ask``, and a stream the server drops and the
SDK joins again through the ``Location`` it was given, with ``Last-Event-ID``.

Without node or without ``npm ci --prefix tests/js`` the tests skip, naming that command.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.cutting_proxy import CuttingProxy
from tests.lg.conftest import Api, Clients

JS = Path(__file__).resolve().parents[1] / "js"
SCRIPT = JS / "agent_chat_ui.mjs"
INSTALL = "npm ci --prefix tests/js"
# the /lg run streams, created (POST …/runs/stream) or joined (GET …/runs/{id}/stream)
LG_STREAMS = rb"^(?:POST|GET) (/lg/threads/\S+/runs/(?:\S+/)?stream\S*) HTTP"


def _missing() -> str | None:
    if shutil.which("node") is None:
        return f"no node on PATH: install Node.js 20, then `{INSTALL}`"
    if not (JS / "node_modules" / "@langchain" / "langgraph-sdk").is_dir():
        return f"the JS SDK is not installed: run `{INSTALL}`"
    return None


# checked before the module's server starts
MISSING = _missing()
pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(MISSING is not None, reason=str(MISSING)),
]


async def agent_chat_ui(url: str, token: str, thread_id: str, *steps: str) -> list[Any]:
    """Runs tests/js/agent_chat_ui.mjs's ``steps`` (``message=TEXT``, ``regenerate``,
    ``resume=ANSWER``) one after the other on the thread; returns what the client saw at
    each."""
    process = await asyncio.create_subprocess_exec(
        "node",
        str(SCRIPT),
        url,
        token,
        thread_id,
        *steps,
        cwd=JS,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(30):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    seen = json.loads(out.decode().strip().splitlines()[-1])
    assert len(seen) == len(steps)
    return list(seen)


def values_of(seen: dict[str, Any]) -> list[dict[str, Any]]:
    assert seen["error"] is None, seen["error"]
    return [part["data"] for part in seen["parts"] if part["event"] == "values"]


def text_of(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


@pytest_asyncio.fixture(loop_scope="module")
async def lg(sdk: Clients, worker: None) -> Clients:
    return sdk


async def test_a_message_streams_as_agent_chat_ui_sends_it(lg: Clients) -> None:
    thread = await lg.alice.threads.create()
    tid = thread["thread_id"]
    [seen] = await agent_chat_ui(lg.url, lg.api.tokens["alice"], tid, "message=hello")
    values = values_of(seen)
    assert values, seen["parts"]
    assert text_of(values[-1]["messages"][-1]) == "echo: hello"
    assert [m["type"] for m in values[-1]["messages"]] == ["human", "ai"]
    assert seen["parts"][0]["event"] == "metadata" and seen["parts"][-1]["event"] != "error"
    # messages-tuple parts (useStream's stream.messages) carry the answer's chunks
    chunks = [p["data"][0] for p in seen["parts"] if p["event"] == "messages"]
    assert "".join(c["content"] for c in chunks) == "echo: hello"
    # onRunCreated got the run from Content-Location: the run the thread has
    [created] = seen["created"]
    [run] = await lg.alice.runs.list(tid)
    assert (created["run_id"], created["thread_id"]) == (run["run_id"], tid)
    assert run["status"] == "success"


async def test_regenerate_from_an_earlier_checkpoint_is_refused_and_stores_nothing(
    lg: Clients,
) -> None:
    thread = await lg.alice.threads.create()
    tid = thread["thread_id"]
    first, seen = await agent_chat_ui(
        lg.url, lg.api.tokens["alice"], tid, "message=1", "regenerate"
    )
    assert text_of(values_of(first)[-1]["messages"][-1]) == "echo: 1"
    # agent-chat-ui forks from the checkpoint before the answer: yuxi never forks
    assert seen["checkpoint"] is not None and seen["checkpoint"]["checkpoint_id"] != seen["head"]
    assert seen["error"] is not None and seen["error"]["status"] == 422, seen
    error = json.loads(seen["error"]["body"])["error"]
    assert error["code"] == "unsupported" and error["message"], error
    assert seen["parts"] == [] and seen["created"] == []
    assert len(await lg.alice.runs.list(tid)) == 1
    # the thread is where the regenerate found it
    after = await lg.alice.threads.get_state(tid)
    assert after["checkpoint"]["checkpoint_id"] == seen["head"]


async def test_resume_after_ask_sends_empty_input_and_a_command(lg: Clients) -> None:
    thread = await lg.alice.threads.create()
    tid = thread["thread_id"]
    token = lg.api.tokens["alice"]
    asking, answering = await agent_chat_ui(
        lg.url, token, tid, "message=/ask colour?", "resume=blue"
    )
    [interrupt] = values_of(asking)[-1]["__interrupt__"]
    assert interrupt["value"]["question"] == "colour?"
    answered = values_of(answering)
    assert text_of(answered[-1]["messages"][-1]) == "you answered: blue"
    assert "__interrupt__" not in answered[-1]
    assert (await lg.alice.threads.get(tid))["status"] == "idle"


@pytest_asyncio.fixture(loop_scope="module")
async def cutting(api: Api) -> AsyncIterator[CuttingProxy]:
    async with CuttingProxy(api.base_url, LG_STREAMS) as proxy:
        yield proxy


async def test_a_stream_the_server_drops_is_joined_again_after_its_last_event(
    lg: Clients, cutting: CuttingProxy
) -> None:
    thread = await lg.alice.threads.create()
    tid = thread["thread_id"]
    # cut after the first part with an id (metadata's values: the event's last part)
    cutting.after = b"event: values"
    cutting.armed = True
    url = f"{cutting.base_url}{lg.api.settings.lg_prefix}"
    [seen] = await agent_chat_ui(url, lg.api.tokens["alice"], tid, "message=/sleep 0.5")
    # the first stream was cut; the SDK joined the run's stream again
    # at the Location the server sent
    first, second, *_ = cutting.streams
    [run] = await lg.alice.runs.list(tid)
    assert first.cut and first.path == f"/lg/threads/{tid}/runs/stream", first.path
    assert second.path.startswith(f"/lg/threads/{tid}/runs/{run['run_id']}/stream"), second.path
    assert text_of(values_of(seen)[-1]["messages"][-1]) == "slept 0.5"
    # with Last-Event-ID: every part once, as a whole stream read from the start has them
    full = [
        {"event": p.event, "data": p.data, "id": p.id}
        async for p in lg.alice.runs.join_stream(tid, run["run_id"])
        if p.event != "end"
    ]
    *parts, end = seen["parts"]
    assert end["event"] == "end"
    assert [(p["event"], p["id"]) for p in parts] == [(p["event"], p["id"]) for p in full]
