"""The console over plain HTTP (no browser needed): its page and files with their
security headers, the login-link exchange, GET /api/me, and PATCH /api/agents/{slug}."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from tests.api.conftest import Api, error_of
from yuxi.queue.login_codes import login_code_create, login_code_redeem

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_the_page_and_its_files_carry_a_strict_csp(api: Api) -> None:
    page = await api.anon.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    assert '<script type="module" src="/console/app.js"></script>' in page.text
    for path in ("/console/app.js", "/console/vendor/purify.es.js", "/console/style.css"):
        response = await api.anon.get(path)
        assert response.status_code == 200, path
        assert response.headers["content-security-policy"] == csp
    assert (
        (await api.anon.get("/console/app.js"))
        .headers["content-type"]
        .startswith("text/javascript")
    )
    # the API's own 404s are unchanged; nothing outside the console directory is served
    error_of(await api.anon.get("/api/nope"), 404, "not_found")
    error_of(await api.anon.get("/console/../routes/console.py"), 404)
    error_of(await api.anon.get("/console/%2e%2e/routes/console.py"), 404)


async def test_a_login_code_is_redeemed_once_for_a_new_token(api: Api) -> None:
    async with api.pool.connection() as conn:
        code = await login_code_create(conn, api.uids["alice"])
    first = await api.anon.post("/api/console/login", json={"code": code})
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["user"] == {"id": str(api.uids["alice"]), "name": "alice", "is_admin": False}
    token = body["token"]
    assert token.startswith("yx_")
    async with api.client(token) as client:
        me = await client.get("/api/me")
        assert me.json()["name"] == "alice"
    error_of(await api.anon.post("/api/console/login", json={"code": code}), 401, "unauthorized")
    error_of(await api.anon.post("/api/console/login", json={"code": "nope"}), 401)
    error_of(await api.anon.post("/api/console/login", json={}), 400, "invalid_request")
    # only hashes are stored
    assert (
        await api.value(
            "SELECT count(*) FROM yuxi.login_codes WHERE code_hash = sha256(%s::bytea)",
            code.encode(),
        )
        == 1
    )
    assert (
        await api.value(
            "SELECT name FROM yuxi.api_tokens t JOIN yuxi.login_codes c ON c.token_id = t.id"
            " WHERE c.code_hash = sha256(%s::bytea)",
            code.encode(),
        )
        == "console login"
    )


async def test_an_expired_code_is_refused(api: Api) -> None:
    now = datetime.now(UTC)
    async with api.pool.connection() as conn:
        code = await login_code_create(conn, api.uids["bob"], now=now, ttl=timedelta(minutes=1))
        assert await login_code_redeem(conn, code, now=now + timedelta(minutes=2)) is None
        assert await login_code_redeem(conn, code, now=now + timedelta(seconds=30)) is not None


async def test_concurrent_redemptions_of_one_code_give_one_token(api: Api) -> None:
    async with api.pool.connection() as conn:
        code = await login_code_create(conn, api.uids["bob"])
    answers = await asyncio.gather(
        *(api.anon.post("/api/console/login", json={"code": code}) for _ in range(6))
    )
    assert sorted(a.status_code for a in answers) == [200] + [401] * 5


async def test_me_needs_a_token(api: Api) -> None:
    error_of(await api.anon.get("/api/me"), 401, "unauthorized")
    assert (await api.admin.get("/api/me")).json()["is_admin"] is True


async def test_patch_agent_replaces_the_config_only(api: Api) -> None:
    created = await api.admin.post(
        "/api/agents",
        json={
            "slug": "patched",
            "name": "Patched",
            "backend_id": "chatbot",
            "share_scope": "selected",
            "shared_with": [str(api.uids["alice"])],
            "max_run_attempts": 4,
        },
    )
    assert created.status_code == 201, created.text
    patched = await api.admin.patch(
        "/api/agents/patched", json={"config": {"context": {"system_prompt": "Be brief."}}}
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["config"] == {"context": {"system_prompt": "Be brief."}}
    assert patched.json()["share_scope"] == "selected"
    assert await api.value("SELECT max_run_attempts FROM yuxi.agents WHERE slug = 'patched'") == 4
    assert (await api.alice.get("/api/agents/patched")).status_code == 200
    error_of(
        await api.alice.patch("/api/agents/patched", json={"config": {"context": {}}}),
        403,
        "forbidden",
    )
    error_of(
        await api.admin.patch("/api/agents/patched", json={"config": {"context": {"colour": 1}}}),
        400,
        "invalid_input",
    )
    error_of(await api.admin.patch("/api/agents/nobody", json={"config": {"context": {}}}), 404)
    error_of(
        await api.admin.patch("/api/agents/patched", json={"name": "x", "config": {}}),
        400,
        "invalid_request",
    )
