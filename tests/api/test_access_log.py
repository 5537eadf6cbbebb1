"""The access log: one structured line per HTTP request, and never a token in any log."""

from __future__ import annotations

import asyncio
import re
import time
import uuid

import pytest

from tests.api.conftest import Api, error_of
from tests.api.log_capture import Capture
from yuxi.queue.users import new_token

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def logged(logs: Capture, path: str, within: float = 5.0) -> dict[str, str]:
    """The one access line of ``path`` (it is written once the response is over)."""
    deadline = time.monotonic() + within
    while not (lines := logs.access(path)):
        if time.monotonic() > deadline:
            raise AssertionError(f"no access line for {path}")
        await asyncio.sleep(0.01)
    assert len(lines) == 1, lines
    return lines[0]


async def test_a_request_is_one_line_with_its_fields(api: Api, logs: Capture) -> None:
    thread = await api.thread()
    path = f"/api/chat/thread/{thread}/history"
    response = await api.alice.get(path)
    assert response.status_code == 200
    line = await logged(logs, path)
    assert line["method"] == "GET" and line["status"] == "200"
    assert float(line["duration_ms"]) >= 0
    assert int(line["bytes"]) == len(response.content)
    assert line["user"] == str(api.uids["alice"])
    assert re.fullmatch(r"127\.0\.0\.1:\d+", line["client"]), line
    assert "query" not in line


async def test_errors_are_logged_with_their_status(api: Api, logs: Capture) -> None:
    missing = f"/api/agent/requests/missing-{uuid.uuid4().hex}"
    error_of(await api.alice.get(missing), 404, "not_found")
    assert (await logged(logs, missing))["status"] == "404"

    unknown = f"/api/no-such-path-{uuid.uuid4().hex}"
    error_of(await api.alice.get(unknown), 404, "not_found")
    line = await logged(logs, unknown)
    assert line["status"] == "404" and line["user"] == "-"  # no route: nobody authenticated

    thread = await api.thread()
    body = {"thread_id": thread, "query": "x", "queue_policy": "sideways"}
    error_of(await api.alice.post("/api/agent/runs", json=body), 400)
    lines = [line for line in logs.access("/api/agent/runs") if line["method"] == "POST"]
    assert [line["status"] for line in lines] == ["400"]

    error_of(await api.anon.get(f"/api/chat/thread/{thread}"), 405)
    error_of(await api.anon.get(f"/api/chat/thread/{thread}/state"), 401)
    line = await logged(logs, f"/api/chat/thread/{thread}/state")
    assert (line["status"], line["user"]) == ("401", "-")


async def test_no_token_appears_in_any_log(api: Api, logs: Capture) -> None:
    wrong = new_token()
    thread = await api.thread()
    secret_query = f"/api/chat/thread/{thread}/history"
    await api.alice.get(secret_query, params={"token": wrong, wrong: "1"})
    async with api.client(wrong) as intruder:
        error_of(await intruder.get("/api/projects"), 401)
        error_of(
            await intruder.post("/api/agent/runs", json={"thread_id": thread, "query": "x"}), 401
        )
    await api.alice.post("/api/agent/runs", json={"thread_id": thread, "query": "/fail " + wrong})
    error_of(await api.alice.get(f"/api/nowhere?access_token={wrong}"), 404)

    line = await logged(logs, secret_query)
    assert line["query"] == "token,…"  # the names, never a value; a long one is not shown
    await logged(logs, "/api/nowhere")
    assert logs.records, "nothing was captured"
    for text in logs.texts():
        for token in (api.tokens["alice"], wrong):
            assert token not in text


async def test_a_stream_is_logged_once_when_it_ends(api: Api, logs: Capture) -> None:
    thread = await api.thread()
    await api.submit(thread, "ahead")  # no worker in this module: it stays pending
    queued = await api.submit(thread, "behind")
    path = f"/api/agent/requests/{queued['request_id']}/events"
    async with api.alice.stream("GET", path) as response:
        assert response.status_code == 200
        lines = response.aiter_lines()
        assert await anext(lines) == "event: queued"
        await asyncio.sleep(0.2)
        assert logs.access(path) == []  # still streaming
        await api.alice.post(f"/api/agent/requests/{queued['request_id']}/cancel")
        rest = [line async for line in lines]
    assert "event: end" in rest
    line = await logged(logs, path)
    assert line["status"] == "200" and float(line["duration_ms"]) >= 200
    assert int(line["bytes"]) > 0
