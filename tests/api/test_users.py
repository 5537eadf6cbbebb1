"""Admins delete users and revoke tokens over HTTP; a revoked token is refused at once."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api, error_of
from yuxi.queue.users import token_create, user_create

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def new_user(api: Api, name: str) -> tuple[str, str, str]:
    """(user id, first token, second token) of a fresh user."""
    async with api.pool.connection() as conn:
        uid, first = await user_create(conn, name)
        second = await token_create(conn, uid, name="laptop")
    return str(uid), first, second


async def status_with(api: Api, token: str) -> int:
    async with api.client(token) as client:
        return (await client.get("/api/chat/threads")).status_code


async def test_only_admins_manage_users(api: Api) -> None:
    uid, _, _ = await new_user(api, "dora")
    for method, path in (
        ("GET", "/api/users"),
        ("DELETE", f"/api/users/{uid}"),
        ("GET", f"/api/users/{uid}/tokens"),
        ("DELETE", f"/api/users/{uid}/tokens"),
    ):
        error_of(await api.alice.request(method, path), 403, "forbidden")
        error_of(await api.anon.request(method, path), 401)
    listed = (await api.admin.get("/api/users")).json()
    dora = next(u for u in listed if u["id"] == uid)
    assert dora["active_tokens"] == 2
    assert set(dora) == {"id", "name", "is_admin", "active_tokens", "last_used_at", "created_at"}


async def test_revoking_one_token_refuses_it_and_keeps_the_other(api: Api) -> None:
    uid, first, second = await new_user(api, "erin")
    assert await status_with(api, first) == 200
    tokens = (await api.admin.get(f"/api/users/{uid}/tokens")).json()
    assert [t["name"] for t in tokens] == ["laptop", "default"]
    assert all(set(t) == {"id", "name", "created_at", "last_used_at", "revoked_at"} for t in tokens)
    assert first not in str(tokens) and second not in str(tokens)
    default = next(t["id"] for t in tokens if t["name"] == "default")
    response = await api.admin.delete(f"/api/users/{uid}/tokens/{default}")
    assert response.status_code == 200 and response.json() == {"revoked": 1}
    assert await status_with(api, first) == 401
    assert await status_with(api, second) == 200
    # revoking it again, or a token of someone else, is a 404
    error_of(await api.admin.delete(f"/api/users/{uid}/tokens/{default}"), 404, "not_found")
    other = str(api.uids["bob"])
    error_of(await api.admin.delete(f"/api/users/{other}/tokens/{default}"), 404, "not_found")
    # all at once
    response = await api.admin.delete(f"/api/users/{uid}/tokens")
    assert response.json() == {"revoked": 1}
    assert await status_with(api, second) == 401


async def test_deleting_a_user_refuses_its_tokens_and_removes_its_jobs(api: Api) -> None:
    uid, token, _ = await new_user(api, "finn")
    async with api.client(token) as client:
        project = (await client.post("/api/projects", json={"name": "p"})).json()["id"]
        job = await client.post(
            "/api/scheduled-jobs",
            json={
                "project_id": project,
                "agent_slug": "chatbot",
                "prompt": "hi",
                "cron": "0 9 * * *",
                "timezone": "UTC",
            },
        )
        assert job.status_code == 201, job.text
    response = await api.admin.delete(f"/api/users/{uid}")
    assert response.status_code == 204, response.text
    assert await status_with(api, token) == 401
    assert (
        await api.value("SELECT count(*) FROM yuxi.scheduled_agent_jobs WHERE uid = %s", uid) == 0
    )
    assert uid not in {u["id"] for u in (await api.admin.get("/api/users")).json()}
    error_of(await api.admin.delete(f"/api/users/{uid}"), 404, "not_found")
    error_of(await api.admin.get(f"/api/users/{uid}/tokens"), 404, "not_found")


async def test_an_admin_cannot_delete_themselves(api: Api) -> None:
    response = await api.admin.delete(f"/api/users/{api.uids['admin']}")
    assert "yourself" in error_of(response, 403, "forbidden")["message"]
    assert await status_with(api, api.tokens["admin"]) == 200
