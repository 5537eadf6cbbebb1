"""The model registry over HTTP: platform models (admins), users' own (BYOK), keys never
shown."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api, error_of

pytestmark = pytest.mark.asyncio(loop_scope="module")

KEY = "sk-test-0123456789abcdef-WXYZ"


async def test_platform_models_are_managed_by_admins_and_picked_by_everyone(api: Api) -> None:
    body = {
        "spec": "openai:gpt-test",
        "name": "GPT test",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key": KEY,
        "capabilities": {"streaming": False, "vision": True},
        "context_window": 8000,
        "max_tokens": 512,
        "temperature": 0.2,
        "price_input_per_mtok": 0.15,
        "price_output_per_mtok": 0.6,
    }
    error_of(await api.alice.post("/api/models", json=body), 403, "forbidden")
    response = await api.admin.post("/api/models", json=body)
    assert response.status_code == 201, response.text
    model = response.json()
    assert KEY not in response.text
    assert model["has_key"] is True and model["api_key_hint"] == "WXYZ"
    assert model["owner"] == "platform" and model["spec"] == "openai:gpt-test"
    assert model["capabilities"] == {
        "streaming": False,
        "function_calling": True,
        "vision": True,
        "json_mode": False,
    }
    assert model["price_input_per_mtok"] == 0.15 and model["context_window"] == 8000
    # stored sealed: the key's bytes are nowhere in the row
    sealed = await api.value("SELECT api_key_sealed FROM yuxi.models WHERE id = %s", model["id"])
    assert KEY.encode() not in bytes(sealed) and len(bytes(sealed)) > len(KEY)

    listed = (await api.alice.get("/api/models")).json()
    assert [m["spec"] for m in listed] == ["openai:gpt-test"]
    error_of(await api.admin.post("/api/models", json=body), 409, "model_exists")

    patched = await api.admin.patch(
        f"/api/models/{model['id']}", json={"enabled": False, "temperature": None}
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["enabled"] is False and patched.json()["temperature"] is None
    assert patched.json()["has_key"] is True  # untouched
    assert (await api.alice.get("/api/models")).json() == []
    error_of(await api.alice.get(f"/api/models/{model['id']}"), 404, "not_found")
    assert (await api.admin.get(f"/api/models/{model['id']}")).status_code == 200
    error_of(await api.alice.patch(f"/api/models/{model['id']}", json={"enabled": True}), 403)
    removed = await api.admin.patch(f"/api/models/{model['id']}", json={"api_key": None})
    assert removed.json()["has_key"] is False and removed.json()["api_key_hint"] is None
    assert (await api.admin.delete(f"/api/models/{model['id']}")).status_code == 204
    error_of(await api.admin.delete(f"/api/models/{model['id']}"), 404, "not_found")


async def test_own_models_are_private(api: Api) -> None:
    response = await api.bob.post(
        "/api/me/models",
        json={"spec": "openai:my-model", "name": "Mine", "api_key": KEY},
    )
    assert response.status_code == 201, response.text
    mine = response.json()
    assert mine["owner"] == "user" and KEY not in response.text
    assert [m["id"] for m in (await api.bob.get("/api/me/models")).json()] == [mine["id"]]
    assert mine["id"] in [m["id"] for m in (await api.bob.get("/api/models")).json()]
    assert (await api.alice.get("/api/me/models")).json() == []
    assert mine["id"] not in [m["id"] for m in (await api.alice.get("/api/models")).json()]
    for response in (
        await api.alice.get(f"/api/me/models/{mine['id']}"),
        await api.alice.patch(f"/api/me/models/{mine['id']}", json={"name": "x"}),
        await api.alice.delete(f"/api/me/models/{mine['id']}"),
        await api.alice.get(f"/api/models/{mine['id']}"),
    ):
        error_of(response, 404, "not_found")
    # the same spec may be one's own next to a platform model, once per user
    error_of(
        await api.bob.post("/api/me/models", json={"spec": "openai:my-model", "name": "again"}),
        409,
        "model_exists",
    )
    again = await api.alice.post("/api/me/models", json={"spec": "openai:my-model", "name": "A"})
    assert again.status_code == 201 and again.json()["has_key"] is False


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"name": "no spec"}, 400, "invalid_input"),
        ({"spec": "openai:x"}, 400, "invalid_input"),
        ({"spec": "nope", "name": "x"}, 400, "invalid_model"),
        ({"spec": "cohere:x", "name": "x"}, 400, "invalid_model"),
        ({"spec": "builtin:other", "name": "x"}, 400, "invalid_model"),
        ({"spec": "openai:x", "name": "x", "base_url": "ftp://x"}, 400, "invalid_request"),
        ({"spec": "openai:x", "name": "x", "temperature": 3}, 400, "invalid_request"),
        ({"spec": "openai:x", "name": "x", "colour": "red"}, 400, "invalid_request"),
        ({"spec": "openai:x", "name": "x", "api_key": "two words"}, 400, "invalid_input"),
        ({"spec": "openai:x", "name": ""}, 400, "invalid_request"),
    ],
)
async def test_bad_models_are_refused(
    api: Api, body: dict[str, object], status: int, code: str
) -> None:
    error_of(await api.alice.post("/api/me/models", json=body), status, code)


async def test_a_request_names_only_models_its_user_may_run(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("YUXI_OPENAI_BASE_URL", "YUXI_OPENAI_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    own = await api.bob.post(
        "/api/me/models", json={"spec": "openai:bobs-model", "name": "Bob's", "api_key": KEY}
    )
    assert own.status_code == 201, own.text
    off = await api.admin.post(
        "/api/models", json={"spec": "openai:retired", "name": "Retired", "enabled": False}
    )
    assert off.status_code == 201, off.text
    thread = await api.thread("alice")
    for spec, message in (
        ("openai:bobs-model", "is not registered"),  # another user's own model
        ("openai:never-heard-of", "is not registered"),
        ("openai:retired", "is disabled"),
    ):
        response = await api.alice.post(
            "/api/agent/runs", json={"thread_id": thread, "query": "hi", "model_spec": spec}
        )
        assert message in error_of(response, 400, "invalid_model")["message"]
    assert (
        await api.value("SELECT count(*) FROM yuxi.agent_run_requests WHERE thread_id = %s", thread)
        == 0
    )
    bobs = await api.thread("bob")
    accepted = await api.bob.post(
        "/api/agent/runs",
        json={"thread_id": bobs, "query": "hi", "model_spec": "openai:bobs-model"},
    )
    assert accepted.status_code == 202, accepted.text
    builtin = await api.alice.post(
        "/api/agent/runs",
        json={"thread_id": thread, "query": "hi", "model_spec": "builtin:scripted"},
    )
    assert builtin.status_code == 202, builtin.text
