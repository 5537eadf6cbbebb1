"""JSON nested deeper than the limit is a 400 naming the limit, at every endpoint that
takes a body and in every place a body nests a value, whatever the Content-Type says:
never a 500, nothing stored. Every route of the schema gets a deep body of every kind."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest
import pytest_asyncio

from tests.api.conftest import Api, error_of
from tests.api.log_capture import ACCESS, Capture
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


# a JSON body is decoded as JSON whatever its Content-Type says: the limit holds for each
OTHER_TYPES = [
    "multipart/form-data; boundary=yuxi",
    "multipart/form-data",
    "application/x-www-form-urlencoded",
    "text/plain",
    None,
]


@pytest.mark.parametrize("content_type", OTHER_TYPES, ids=lambda t: t or "no content-type")
async def test_deep_nesting_is_400_whatever_the_content_type(
    api: Api, ids: Ids, content_type: str | None
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    before = await api.value("SELECT count(*) FROM yuxi.messages")
    more = [
        ("POST", "/api/me/models", nested(100_000)),
        ("POST", "/lg/threads", nested(100_000, "object")),
        ("POST", "/lg/runs/wait", nested(100_000)),
    ]
    for method, path, body in [*bodies(ids, nested(100_000)), *more]:
        response = await api.admin.request(method, path, content=body.encode(), headers=headers)
        error = error_of(response, 400, "invalid_input")
        assert str(MAX_JSON_DEPTH) in error["message"], (path, error)
    assert await api.value("SELECT count(*) FROM yuxi.messages") == before


async def test_uploads_of_deep_json_are_files_not_json(api: Api) -> None:
    """The routes that stream their body (attachments, knowledge-base documents) or read
    it raw (a workspace file, a skill) are left to do so: a deep JSON file is a file."""
    deep = nested(100_000).encode()
    thread = await api.thread()
    response = await api.alice.post(
        f"/api/chat/thread/{thread}/attachments",
        files={"file": ("deep.json", deep, "application/json")},
    )
    assert response.status_code == 201, response.text
    [attachment] = response.json()
    assert attachment["bytes"] == len(deep)
    kb = (await api.alice.post("/api/knowledge-bases", json={"name": "deep"})).json()
    response = await api.alice.post(
        f"/api/knowledge-bases/{kb['id']}/documents",
        files={"file": ("deep.json", deep, "application/json")},
    )
    assert response.status_code == 201, response.text
    assert response.json()[0]["bytes"] == len(deep)
    under_its_limit = nested(30_000).encode()  # a workspace file is at most 64 KiB
    response = await api.alice.put("/api/workspace/files/agents/USER.md", content=under_its_limit)
    assert response.status_code == 200, response.text
    error = error_of(
        await api.alice.post("/api/skills?personal=true", content=deep, headers={}), 400
    )
    assert "not a ZIP" in error["message"]


# -- every route of the schema ------------------------------------------------------------

BOUNDARY = "yuxi-deep"


def deep_bodies() -> list[tuple[str, bytes, dict[str, str]]]:
    """(what, body, headers): a body nested 100,000 deep as each kind of body a client
    may send."""
    array = nested(100_000).encode()
    obj = nested(100_000, "object").encode()
    part = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="data"\r\n\r\n'.encode()
        + array
        + f'\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name="file";'
        ' filename="deep.json"\r\nContent-Type: application/json\r\n\r\n'.encode()
        + obj
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )
    multipart = {"content-type": f"multipart/form-data; boundary={BOUNDARY}"}
    form = {"content-type": "application/x-www-form-urlencoded"}
    return [
        ("JSON arrays", array, {"content-type": "application/json"}),
        ("JSON objects", obj, {"content-type": "application/json"}),
        ("multipart, as it is", array, multipart),
        ("multipart, in parts", part, multipart),
        ("a form, as it is", array, form),
        ("a form field", b"data=" + quote(array).encode(), form),
        ("text", obj, {"content-type": "text/plain"}),
        ("no content-type", array, {}),
    ]


@dataclass
class Owned:
    """The admin's own objects, for the routes that take a body: a real target lets a
    body reach as far as it can."""

    values: dict[str, str]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def owned(api: Api) -> Owned:
    thread = await api.thread("admin")
    run = await api.submit(thread, "pending forever", who="admin")
    kb = await api.admin.post("/api/knowledge-bases", json={"name": "deep targets"})
    assert kb.status_code == 201, kb.text
    project = (await api.admin.post("/api/projects", json={"name": "deep"})).json()["id"]
    job = await api.admin.post(
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
    return Owned(
        {
            "thread_id": thread,
            "run_id": run["run_id"],
            "request_id": run["request_id"],
            "kb_id": kb.json()["id"],
            "job_id": job.json()["id"],
            "uid": str(api.uids["admin"]),
            "slug": "chatbot",
            "assistant_id": "chatbot",
            "name": "agents/USER.md",
        }
    )


def fill(path: str, operation: dict[str, Any], method: str, owned: Owned) -> str:
    """``path`` with its parameters: the admin's own objects for a route that takes a
    body (never for DELETE, which would remove them; nor for GET, whose streams would
    stay open), otherwise ids that name nothing."""
    for parameter in operation.get("parameters", []):
        if parameter["in"] != "path":
            continue
        name = parameter["name"]
        schema = parameter.get("schema", {})
        if method in ("POST", "PUT", "PATCH") and name in owned.values:
            value = owned.values[name]
        elif schema.get("type") == "integer":
            value = "999999"
        elif schema.get("format") == "uuid" or name.endswith("_id") or name == "uid":
            value = str(uuid.uuid4())
        else:
            value = "no-such-thing"
        path = re.sub(r"\{" + re.escape(name) + r"(:[^}]*)?\}", value, path)
    assert "{" not in path, path
    return path


async def test_no_route_answers_a_deep_body_with_a_500(
    api: Api, owned: Owned, logs: Capture
) -> None:
    """Every operation of the served OpenAPI schema, with the admin's token, gets the
    body nested 100,000 deep as JSON, multipart and form bodies, text and without a
    Content-Type: each answer is below 500 (an error with the error body), and the
    server logs no traceback."""
    schema = (await api.admin.get("/schema/openapi.json")).json()
    bodies = deep_bodies()
    operations = 0
    for template, item in schema["paths"].items():
        for method, operation in item.items():
            if method.upper() not in ("GET", "POST", "PUT", "PATCH", "DELETE"):
                continue
            path = fill(template, operation, method.upper(), owned)
            operations += 1
            for what, body, headers in bodies:
                response = await api.admin.request(
                    method.upper(), path, content=body, headers=headers
                )
                assert response.status_code < 500, (
                    f"{method.upper()} {template} with {what}: {response.status_code}"
                    f" {response.text[:300]}"
                )
                if response.status_code >= 400:
                    error_of(response, response.status_code)
    assert operations > 100, operations  # the whole API, /lg included
    assert logs.tracebacks() == []
    server_errors = [
        record.getMessage()
        for record in logs.records
        if record.name == ACCESS and " status=5" in record.getMessage()
    ]
    assert server_errors == []
