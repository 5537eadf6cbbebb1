"""JSON nested deeper than the limit is a 400 naming the limit, at every endpoint that
takes a body and in every place a body nests a value: never a 500, nothing stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from tests.api.conftest import Api, error_of
from yuxi.api.limits import MAX_JSON_DEPTH

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEPTHS = (MAX_JSON_DEPTH + 1, 1_000, 10_000, 100_000)


@dataclass
class Ids:
    thread: str
    run: str
    project: str
    job: str


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ids(api: Api) -> AsyncIterator[Ids]:
    thread = await api.thread()
    info = await api.submit(thread, "pending forever")
    project = (await api.alice.post("/api/projects", json={"name": "nest"})).json()["id"]
    job = await api.alice.post(
        "/api/scheduled-jobs",
        json={
            "project_id": project,
            "agent_slug": "chatbot",
            "prompt": "p",
            "cron": "0 9 * * *",
            "timezone": "UTC",
            "enabled": False,
        },
    )
    assert job.status_code == 201, job.text
    yield Ids(thread, info["run_id"], project, job.json()["id"])


def nested(depth: int, kind: str = "array") -> str:
    """A JSON value nested ``depth`` levels deep."""
    if kind == "array":
        return "[" * depth + "]" * depth
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def bodies(ids: Ids, value: str) -> list[tuple[str, str, str]]:
    """(method, path, body text) with ``value`` in each place a value can nest."""
    agent = '{"slug": "deep", "name": "n", "backend_id": "chatbot", "config": {"context": VALUE}}'
    saved = '{"name": "n", "backend_id": "chatbot", "config": VALUE}'
    return [
        ("POST", "/api/agent/runs", value),
        ("POST", "/api/agent/runs", f'{{"thread_id": "{ids.thread}", "query": {value}}}'),
        ("POST", f"/api/agent/runs/{ids.run}/resume", f'{{"resume": {value}}}'),
        ("POST", "/api/agents", agent.replace("VALUE", value)),
        (
            "PUT",
            "/api/agents/chatbot",
            saved.replace("VALUE", value),
        ),
        ("POST", "/api/projects", f'{{"name": {value}}}'),
        ("POST", "/api/chat/thread", f'{{"agent_id": "chatbot", "title": {value}}}'),
        ("POST", "/api/scheduled-jobs", f'{{"project_id": "{ids.project}", "prompt": {value}}}'),
        ("PATCH", f"/api/scheduled-jobs/{ids.job}", f'{{"prompt": {value}}}'),
        ("PATCH", f"/api/scheduled-jobs/{ids.job}", value),
    ]


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("kind", ["array", "object"])
async def test_deep_nesting_is_400_everywhere(api: Api, ids: Ids, depth: int, kind: str) -> None:
    before = await api.value("SELECT count(*) FROM yuxi.messages")
    for method, path, body in bodies(ids, nested(depth, kind)):
        response = await api.admin.request(
            method, path, content=body.encode(), headers={"content-type": "application/json"}
        )
        error = error_of(response, 400, "invalid_input")
        assert str(MAX_JSON_DEPTH) in error["message"], (path, error)
    assert await api.value("SELECT count(*) FROM yuxi.messages") == before


async def test_nesting_at_the_limit_is_accepted(api: Api, ids: Ids) -> None:
    value: Any = "x"
    for _ in range(MAX_JSON_DEPTH - 2):  # the body and the resume field are two levels
        value = [value]
    thread = await api.thread()
    await api.submit(thread, "/ask deep?")
    response = await api.alice.post(f"/api/agent/runs/{ids.run}/resume", json={"resume": value})
    # accepted by the depth check: refused only because that run is not interrupted
    error_of(response, 409, "run_not_interrupted")


async def test_brackets_inside_strings_do_not_count(api: Api, ids: Ids) -> None:
    query = "[" * 10_000 + "{" * 10_000
    response = await api.alice.post(
        "/api/agent/runs", json={"thread_id": ids.thread, "query": query}
    )
    assert response.status_code == 202, response.text[:300]
