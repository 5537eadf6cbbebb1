"""Bad input is a 4xx with the contract's error body, never a 500."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.api.conftest import Api, client_error, error_of

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Ids:
    thread: str
    run: str
    request: str


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ids(api: Api) -> AsyncIterator[Ids]:
    thread = await api.thread()
    info = await api.submit(thread, "pending forever")
    yield Ids(thread, info["run_id"], info["request_id"])


async def post_raw(client: httpx.AsyncClient, path: str, content: bytes) -> httpx.Response:
    return await client.post(path, content=content, headers={"content-type": "application/json"})


def body_endpoints(ids: Ids) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path, a valid body) of every endpoint with a JSON body."""
    return [
        ("POST", "/api/agents", {"slug": "v-agent", "name": "n", "backend_id": "chatbot"}),
        ("PUT", "/api/agents/chatbot", {"name": "Chatbot", "backend_id": "chatbot"}),
        ("POST", "/api/projects", {"name": "p"}),
        ("POST", "/api/chat/thread", {"agent_id": "chatbot"}),
        ("POST", "/api/agent/runs", {"thread_id": ids.thread, "query": "q"}),
        ("POST", f"/api/agent/runs/{ids.run}/resume", {"resume": "x"}),
    ]


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"", b"[]", b"null", b"42", b'"text"', b"\xff\xfe", b'{"a": 1}{', b"{"],
    ids=repr,
)
async def test_malformed_or_non_object_json_is_400(api: Api, ids: Ids, content: bytes) -> None:
    for method, path, _ in body_endpoints(ids):
        response = await api.admin.request(
            method, path, content=content, headers={"content-type": "application/json"}
        )
        error_of(response, 400)


async def test_unknown_fields_are_400(api: Api, ids: Ids) -> None:
    for method, path, body in body_endpoints(ids):
        response = await api.admin.request(method, path, json=body | {"surprise": True})
        error = error_of(response, 400)
        assert "surprise" in error["message"]


async def test_missing_required_fields_are_400(api: Api, ids: Ids) -> None:
    for method, path, body in body_endpoints(ids):
        required = [k for k in body if k not in ("slug",)]
        for key in required:
            partial = {k: v for k, v in body.items() if k != key}
            response = await api.admin.request(method, path, json=partial)
            error_of(response, 400)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("thread_id", 5),
        ("thread_id", "not-a-uuid"),
        ("thread_id", None),
        ("query", 5),
        ("query", None),
        ("query", ["q"]),
        ("request_id", 7),
        ("queue_policy", None),
        ("queue_policy", 1),
        ("model_spec", 1),
        ("tool_approval_mode", True),
    ],
)
async def test_wrong_types_in_a_submit_are_400(api: Api, ids: Ids, field: str, value: Any) -> None:
    body = {"thread_id": ids.thread, "query": "q", field: value}
    error_of(await api.alice.post("/api/agent/runs", json=body), 400)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/chat/thread", {"agent_id": 5}),
        ("/api/chat/thread", {"agent_id": "chatbot", "title": 5}),
        ("/api/chat/thread", {"agent_id": "chatbot", "project_id": "nope"}),
        ("/api/projects", {"name": ["p"]}),
        ("/api/projects", {"name": "p", "workdir_path": 3}),
        ("/api/agents", {"slug": "t1", "name": 1, "backend_id": "chatbot"}),
        ("/api/agents", {"slug": "t2", "name": "n", "backend_id": "chatbot", "config": []}),
        ("/api/agents", {"slug": "t3", "name": "n", "backend_id": "chatbot", "is_subagent": "y"}),
        ("/api/agents", {"slug": "t4", "name": "n", "backend_id": "chatbot", "shared_with": "x"}),
        ("/api/agents", {"slug": "t5", "name": "n", "backend_id": "chatbot", "description": None}),
    ],
    ids=str,
)
async def test_wrong_types_elsewhere_are_400(api: Api, path: str, body: dict[str, Any]) -> None:
    error_of(await api.admin.post(path, json=body), 400)


async def test_a_body_over_the_limit_is_413(api: Api, ids: Ids) -> None:
    limit = api.settings.max_body_bytes
    assert limit == 1024 * 1024
    query = "x" * (limit + 1)
    response = await api.alice.post(
        "/api/agent/runs", json={"thread_id": ids.thread, "query": query}
    )
    error_of(response, 413, "request_too_large")
    response = await post_raw(api.alice, "/api/chat/thread", b" " * (limit + 1))
    error_of(response, 413)
    # just under the limit is accepted
    query = "y" * (limit - 200)
    info = await api.alice.post("/api/agent/runs", json={"thread_id": ids.thread, "query": query})
    assert info.status_code == 202, info.text[:200]


@pytest.mark.parametrize(
    "path",
    [
        "/api/agent/runs/not-a-uuid",
        "/api/agent/runs/not-a-uuid/result",
        "/api/agent/runs/not-a-uuid/manifest",
        "/api/agent/runs/not-a-uuid/events",
        "/api/agent/runs/1234/cancel",
        "/api/agent/runs/xyz/resume",
        "/api/chat/thread/not-a-uuid/history",
        "/api/chat/thread/not-a-uuid/viewed",
        "/api/chat/thread/not-a-uuid/state",
        "/api/chat/thread/not-a-uuid",
        "/api/agent/thread/not-a-uuid/requests",
        "/api/agent/thread/not-a-uuid/requests/continue",
    ],
)
async def test_invalid_uuids_in_paths_are_4xx(api: Api, path: str) -> None:
    for method in ("GET", "POST", "DELETE"):
        body = {"resume": 1} if path.endswith("/resume") else None
        client_error(await api.alice.request(method, path, json=body))


@pytest.mark.parametrize(
    "request_id",
    ["", " leading-space", "-dash-first", ".dot-first", "has space", "a/b", "ü", "x" * 129, "a\tb"],
    ids=repr,
)
async def test_bad_request_id_format_is_400(api: Api, ids: Ids, request_id: str) -> None:
    body = {"thread_id": ids.thread, "query": "q", "request_id": request_id}
    error_of(await api.alice.post("/api/agent/runs", json=body), 400)


async def test_longest_request_id_is_accepted(api: Api, ids: Ids) -> None:
    request_id = "a" + ("b:c.d_e-" * 16)[:127]
    assert len(request_id) == 128
    body = {"thread_id": ids.thread, "query": "q", "request_id": request_id}
    response = await api.alice.post("/api/agent/runs", json=body)
    assert response.status_code == 202, response.text
    assert (await api.request(request_id))["request_id"] == request_id


@pytest.mark.parametrize(
    "model_spec",
    ["nope", "", "   ", "unknown:model", "builtin:nope", "builtin:", ":scripted", "builtin: x"],
    ids=repr,
)
async def test_bad_model_spec_is_400(api: Api, ids: Ids, model_spec: str) -> None:
    body = {"thread_id": ids.thread, "query": "q", "model_spec": model_spec}
    error_of(await api.alice.post("/api/agent/runs", json=body), 400, "invalid_model")


@pytest.mark.parametrize("queue_policy", ["later", "", "ENQUEUE", "steer "])
async def test_bad_queue_policy_is_400(api: Api, ids: Ids, queue_policy: str) -> None:
    body = {"thread_id": ids.thread, "query": "q", "queue_policy": queue_policy}
    error_of(await api.alice.post("/api/agent/runs", json=body), 400)


@pytest.mark.parametrize("mode", ["never", "", "ASK"])
async def test_bad_tool_approval_mode_is_400(api: Api, ids: Ids, mode: str) -> None:
    body = {"thread_id": ids.thread, "query": "q", "tool_approval_mode": mode}
    error_of(await api.alice.post("/api/agent/runs", json=body), 400)


@pytest.mark.parametrize(
    "query",
    [
        "",
        "   ",
        "\n\t",
    ],
    ids=repr,
)
async def test_an_empty_query_is_400(api: Api, ids: Ids, query: str) -> None:
    body = {"thread_id": ids.thread, "query": query}
    error_of(await api.alice.post("/api/agent/runs", json=body), 400)


@pytest.mark.parametrize("after_seq", ["-1", "-100", "x", "1.5", ""], ids=repr)
async def test_bad_after_seq_is_400(api: Api, ids: Ids, after_seq: str) -> None:
    response = await api.alice.get(
        f"/api/agent/runs/{ids.run}/events", params={"after_seq": after_seq}
    )
    error_of(response, 400)


@pytest.mark.parametrize("last_event_id", ["abc", "1.5", "0x10", "1 2"], ids=repr)
async def test_non_numeric_last_event_id_is_400(api: Api, ids: Ids, last_event_id: str) -> None:
    response = await api.alice.get(
        f"/api/agent/runs/{ids.run}/events", headers={"Last-Event-ID": last_event_id}
    )
    error_of(response, 400)


@pytest.mark.parametrize(
    "where", ["after_seq", "Last-Event-ID"], ids=["after_seq", "last_event_id"]
)
async def test_an_event_position_beyond_bigint_is_400(api: Api, ids: Ids, where: str) -> None:
    """Once failed: the value reached SQL as numeric mid-stream and the connection broke."""
    huge = str(2**63)
    params = {"after_seq": huge} if where == "after_seq" else None
    headers = {"Last-Event-ID": huge} if where == "Last-Event-ID" else None
    response = await api.alice.get(
        f"/api/agent/runs/{ids.run}/events", params=params, headers=headers
    )
    error_of(response, 400)


def _nul_cases() -> list[Any]:
    nul = "a\u0000b"
    cases: list[tuple[str, str, str, dict[str, Any] | str]] = [
        ("query", "POST", "/api/agent/runs", {"query": nul}),
        ("request_id", "POST", "/api/agent/runs", {"query": "q", "request_id": nul}),
        ("thread_title", "POST", "/api/chat/thread", {"agent_id": "chatbot", "title": nul}),
        ("thread_agent_id", "POST", "/api/chat/thread", {"agent_id": nul}),
        ("project_name", "POST", "/api/projects", {"name": nul}),
        ("workdir_path", "POST", "/api/projects", {"name": "p", "workdir_path": nul}),
        ("resume_value", "POST", "/api/agent/runs/{run}/resume", {"resume": nul}),
        (
            "agent_name",
            "POST",
            "/api/agents",
            {"slug": "nul-a", "name": nul, "backend_id": "chatbot"},
        ),
        (
            "agent_config",
            "POST",
            "/api/agents",
            {
                "slug": "nul-b",
                "name": "n",
                "backend_id": "chatbot",
                "config": {"context": {"system_prompt": nul}},
            },
        ),
        ("request_path_get", "GET", "/api/agent/requests/a%00b", ""),
        ("request_path_cancel", "POST", "/api/agent/requests/a%00b/cancel", ""),
        ("request_path_steer", "POST", "/api/agent/requests/a%00b/steer", ""),
    ]
    return [pytest.param(*case, id=case[0]) for case in cases]


@pytest.mark.parametrize(("name", "method", "path", "body"), _nul_cases())
async def test_a_nul_character_is_400_not_500(
    api: Api, ids: Ids, name: str, method: str, path: str, body: dict[str, Any] | str
) -> None:
    path = path.format(run=ids.run)
    payload = None
    if isinstance(body, dict):
        payload = dict(body)
        if path == "/api/agent/runs":
            payload["thread_id"] = ids.thread
    client = api.admin if path.startswith("/api/agents") else api.alice
    response = await client.request(method, path, json=payload)
    if path.startswith("/api/agent/requests/"):
        # an unknown request id: 404 would be right too
        client_error(response)
    else:
        error_of(response, 400)


async def test_error_bodies_are_json(api: Api) -> None:
    response = await post_raw(api.alice, "/api/agent/runs", b"{")
    assert response.headers["content-type"].startswith("application/json")
    assert json.loads(response.text)["error"]["code"]


@pytest.mark.parametrize(
    "workdir_path",
    ["x" * 5_000, "x" * 201, "", "é" * 150],
    ids=["5000", "201", "empty", "300-bytes-component"],
)
async def test_a_workdir_path_the_server_cannot_take_is_400(api: Api, workdir_path: str) -> None:
    response = await api.alice.post(
        "/api/projects", json={"name": "p", "workdir_path": workdir_path}
    )
    # "é" * 150 is within the length limit, but a 300-byte name the filesystem refuses
    error = error_of(response, 400)
    assert "workdir_path" in error["message"]
    assert str(api.settings.home.resolve()) not in response.text
