"""Health, authentication, and the app itself."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.api.conftest import Api, error_of
from yuxi.queue.users import new_token, token_hash

pytestmark = pytest.mark.asyncio(loop_scope="module")

SOME_ID = str(uuid.uuid4())

# every authenticated endpoint of CONTRACT.md (scheduled jobs aside), with a valid body
ENDPOINTS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/api/agents", None),
    ("GET", "/api/agents/chatbot", None),
    ("POST", "/api/agents", {"slug": "nope", "name": "n", "backend_id": "chatbot"}),
    ("PUT", "/api/agents/chatbot", {"name": "n", "backend_id": "chatbot"}),
    ("POST", "/api/projects", {"name": "p"}),
    ("GET", "/api/projects", None),
    ("POST", "/api/chat/thread", {"agent_id": "chatbot"}),
    ("GET", "/api/chat/threads", None),
    ("DELETE", f"/api/chat/thread/{SOME_ID}", None),
    ("GET", f"/api/chat/thread/{SOME_ID}/history", None),
    ("POST", f"/api/chat/thread/{SOME_ID}/viewed", None),
    ("GET", f"/api/chat/thread/{SOME_ID}/state", None),
    ("POST", "/api/agent/runs", {"thread_id": SOME_ID, "query": "hi"}),
    ("POST", f"/api/agent/runs/{SOME_ID}/resume", {"resume": "x"}),
    ("GET", f"/api/agent/runs/{SOME_ID}", None),
    ("GET", f"/api/agent/runs/{SOME_ID}/result", None),
    ("POST", f"/api/agent/runs/{SOME_ID}/cancel", None),
    ("GET", f"/api/agent/runs/{SOME_ID}/events", None),
    ("GET", f"/api/agent/runs/{SOME_ID}/manifest", None),
    ("GET", "/api/agent/requests/req-1", None),
    ("POST", "/api/agent/requests/req-1/cancel", None),
    ("POST", "/api/agent/requests/req-1/steer", None),
    ("GET", f"/api/agent/thread/{SOME_ID}/requests", None),
    ("POST", f"/api/agent/thread/{SOME_ID}/requests/continue", None),
]


async def test_health_needs_no_auth(api: Api) -> None:
    response = await api.anon.get("/api/system/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["database"] == "ok"
    assert isinstance(body["workers"], int) and body["workers"] >= 0


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS, ids=lambda v: str(v)[:40])
async def test_every_endpoint_needs_a_token(
    api: Api, method: str, path: str, body: dict[str, Any] | None
) -> None:
    for headers in (
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer ~"},
        {"Authorization": f"Bearer {new_token()}"},
        {"Authorization": f"Basic {api.tokens['alice']}"},
        {"Authorization": api.tokens["alice"]},
    ):
        response = await api.anon.request(method, path, json=body, headers=headers)
        error_of(response, 401, "unauthorized")


async def test_a_valid_token_authenticates(api: Api) -> None:
    for who in ("alice", "bob", "admin"):
        assert (await api.clients[who].get("/api/agents")).status_code == 200
    # the scheme is case-insensitive; extra spaces before the token do not matter
    response = await api.anon.get(
        "/api/agents", headers={"Authorization": f"bearer  {api.tokens['alice']}"}
    )
    assert response.status_code == 200


async def test_revoked_tokens_and_deleted_users_are_refused(api: Api) -> None:
    token = new_token()
    await api.sql(
        "SELECT yuxi.token_create(%s, %s, 'second')", api.uids["alice"], token_hash(token)
    )
    async with api.client(token) as client:
        assert (await client.get("/api/projects")).status_code == 200
        await api.sql(
            "UPDATE yuxi.api_tokens SET revoked_at = now() WHERE token_hash = %s",
            token_hash(token),
        )
        error_of(await client.get("/api/projects"), 401, "unauthorized")

    carol_token = new_token()
    carol = await api.value("SELECT yuxi.user_create('carol', false, %s)", token_hash(carol_token))
    async with api.client(carol_token) as client:
        assert (await client.get("/api/projects")).status_code == 200
        await api.sql("UPDATE yuxi.users SET deleted_at = now() WHERE id = %s", carol)
        error_of(await client.get("/api/projects"), 401, "unauthorized")


async def test_a_runs_routes_check_the_token_in_their_own_statement(api: Api) -> None:
    """Submit, a run's stream and its result authenticate inside the statement that acts
    (yuxi.queue.callers.Bearer): a token revoked in psql is refused by the next request,
    which stores nothing, and a live token still reads only its own user's runs."""
    token = new_token()
    await api.sql("SELECT yuxi.token_create(%s, %s, 'runs')", api.uids["alice"], token_hash(token))
    thread = await api.thread()
    async with api.client(token) as client:
        submitted = await client.post("/api/agent/runs", json={"thread_id": thread, "query": "a"})
        assert submitted.status_code == 202, submitted.text
        run_id = submitted.json()["run_id"]
        assert (await client.get(f"/api/agent/runs/{run_id}/result")).status_code == 200
        # bob's token reads nothing of alice's run: the call ran as bob
        error_of(await api.bob.get(f"/api/agent/runs/{run_id}/result"), 404, "not_found")
        error_of(await api.bob.get(f"/api/agent/runs/{run_id}/events"), 404, "not_found")

        await api.sql(
            "UPDATE yuxi.api_tokens SET revoked_at = now() WHERE token_hash = %s",
            token_hash(token),
        )
        requests_before = await api.value(
            "SELECT count(*) FROM yuxi.agent_run_requests WHERE thread_id = %s", thread
        )
        refused = await client.post("/api/agent/runs", json={"thread_id": thread, "query": "b"})
        error_of(refused, 401, "unauthorized")
        assert (
            await api.value(
                "SELECT count(*) FROM yuxi.agent_run_requests WHERE thread_id = %s", thread
            )
            == requests_before
        )
        error_of(await client.get(f"/api/agent/runs/{run_id}/result"), 401, "unauthorized")
        error_of(await client.get(f"/api/agent/runs/{run_id}/events"), 401, "unauthorized")
        resumed = await client.get(f"/api/agent/runs/{run_id}/events?after_seq=0")
        error_of(resumed, 401, "unauthorized")
    # the token's last use was recorded by the statements that checked it
    assert await api.value(
        "SELECT last_used_at IS NOT NULL FROM yuxi.api_tokens WHERE token_hash = %s",
        token_hash(token),
    )


async def test_unknown_routes_and_methods_are_4xx_with_the_error_body(api: Api) -> None:
    error_of(await api.alice.get("/api/nothing-here"), 404, "not_found")
    response = await api.alice.delete("/api/agents/chatbot")  # get, put and patch exist
    assert response.status_code == 405
    error_of(response, 405, "method_not_allowed")
