"""Runs on registry models against the local OpenAI-compatible stub: a user's own key
(BYOK) and a platform model's flags and parameters reach the provider; the key reaches
nothing else."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.conftest import Api
from tests.openai_stub import TEXT, StubServer, stub_server

pytestmark = pytest.mark.asyncio(loop_scope="module")

BYOK_KEY = "sk-bob-own-key-5f0c9e7d1a2b"
PLATFORM_KEY = "sk-platform-key-77aa55cc3311"


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    with stub_server() as server:
        yield server


async def _run(api: Api, who: str, thread: str, query: str, spec: str) -> dict[str, Any]:
    request = await api.submit(thread, query, who=who, model_spec=spec)
    view = await api.wait_dispatched(request["request_id"], who=who)
    await api.wait_run(view["run_id"], who=who)
    return {"run_id": view["run_id"], **(await api.result(view["run_id"], who=who))}


async def test_a_byok_model_is_called_with_its_owners_key_only(
    api: Api, worker: None, stub: StubServer
) -> None:
    created = await api.bob.post(
        "/api/me/models",
        json={
            "spec": "openai:bobs-gpt",
            "name": "Bob's",
            "base_url": stub.base_url,
            "api_key": BYOK_KEY,
        },
    )
    assert created.status_code == 201, created.text
    thread = await api.thread("bob")
    seen = len(stub.requests)
    result = await _run(api, "bob", thread, "hello", "openai:bobs-gpt")
    # the chatbot offers its tools: the stub calls one, then answers the tool's result
    assert result["status"] == "completed" and result["output"].startswith("tool said"), result
    calls = stub.requests[seen:]
    assert calls and all(c.headers["authorization"] == f"Bearer {BYOK_KEY}" for c in calls)
    assert {c.body["model"] for c in calls} == {"bobs-gpt"}
    # streamed calls, their usage asked for and added up; a BYOK run is never charged
    assert all(c.body["stream"] and c.body["stream_options"]["include_usage"] for c in calls)
    usage = result["usage"]
    assert usage["input_tokens"] == 3 * len(calls) and usage["output_tokens"] == 5 * len(calls)
    assert usage["cost"] is None and usage["by_model"][0]["byok"] is True

    manifest = (await api.bob.get(f"/api/agent/runs/{result['run_id']}/manifest")).json()
    snapshot = (
        manifest["manifest"]["model_snapshot"]
        if "manifest" in manifest
        else manifest["model_snapshot"]
    )
    assert snapshot["id"] == created.json()["id"] and snapshot["byok"] is True
    assert snapshot["has_key"] is True and BYOK_KEY not in json.dumps(manifest)
    events = await api.bob.get(f"/api/agent/runs/{result['run_id']}/events")
    assert BYOK_KEY not in events.text
    history = await api.history(thread, "bob")
    assert BYOK_KEY not in json.dumps(history)
    # nowhere in the database in the clear: not in a row, a checkpoint or an event
    tables = await api.sql(
        "SELECT schemaname || '.' || tablename FROM pg_tables"
        " WHERE schemaname = 'yuxi' OR tablename LIKE 'checkpoint%%'"
    )
    for (table,) in tables:
        for row in await api.sql(f"SELECT * FROM {table}"):
            for value in row:
                raw = bytes(value) if isinstance(value, (bytes, memoryview)) else None
                assert BYOK_KEY.encode() not in (raw or json.dumps(value, default=str).encode())


async def test_a_platform_models_flags_and_parameters_reach_the_provider(
    api: Api, worker: None, stub: StubServer
) -> None:
    created = await api.admin.post(
        "/api/models",
        json={
            "spec": "openai:flat",
            "name": "Flat",
            "base_url": stub.base_url,
            "api_key": PLATFORM_KEY,
            "capabilities": {"streaming": False, "function_calling": False},
            "temperature": 0.3,
            "max_tokens": 77,
            "price_input_per_mtok": 1.0,
            "price_output_per_mtok": 2.0,
        },
    )
    assert created.status_code == 201, created.text
    thread = await api.thread("alice")
    upload = await api.alice.post(
        f"/api/chat/thread/{thread}/attachments",
        files=[("file", ("notes.txt", b"12345", "text/plain"))],
    )
    assert upload.status_code == 201, upload.text
    seen = len(stub.requests)
    result = await _run(api, "alice", thread, "what did I attach?", "openai:flat")
    assert result["status"] == "completed" and result["output"] == TEXT, result
    [call] = stub.requests[seen:]
    assert call.headers["authorization"] == f"Bearer {PLATFORM_KEY}"
    assert not call.body.get("stream") and "tools" not in call.body
    assert call.body["temperature"] == 0.3
    assert 77 in (call.body.get("max_tokens"), call.body.get("max_completion_tokens"))
    system = call.body["messages"][0]
    assert system["role"] == "system"
    # one call, priced: (3 x 1.0 + 5 x 2.0) per million tokens
    assert result["usage"]["input_tokens"] == 3 and result["usage"]["output_tokens"] == 5
    assert result["usage"]["cost"] == pytest.approx(13e-6)
    content = system["content"]
    text = content if isinstance(content, str) else "".join(p["text"] for p in content)
    assert "- uploads/notes.txt (text/plain, 5 bytes)" in text


PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
    b"\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99"
    b"=\x1d\x00\x00\x00\x00IEND\xaeB`\x82"
)


def _user_content(call: Any) -> Any:
    return [m for m in call.body["messages"] if m["role"] == "user"][-1]["content"]


async def test_vision_sends_the_images_a_message_refers_to(
    api: Api, worker: None, stub: StubServer
) -> None:
    for spec, vision in (("openai:seeing", True), ("openai:blind", False)):
        created = await api.admin.post(
            "/api/models",
            json={
                "spec": spec,
                "name": spec,
                "base_url": stub.base_url,
                "api_key": PLATFORM_KEY,
                "capabilities": {"vision": vision, "function_calling": False},
            },
        )
        assert created.status_code == 201, created.text
    thread = await api.thread("alice")
    upload = await api.alice.post(
        f"/api/chat/thread/{thread}/attachments",
        files=[
            ("file", ("dot.png", PNG, "image/png")),
            ("file", ("notes.txt", b"hello", "text/plain")),
            ("file", ("other.png", PNG + b"x", "image/png")),
        ],
    )
    assert upload.status_code == 201, upload.text
    ids = {a["filename"]: a["id"] for a in upload.json()}

    async def ask(spec: str, attachments: list[str]) -> Any:
        seen = len(stub.requests)
        request = await api.submit(
            thread, "what is in it?", model_spec=spec, attachments=attachments
        )
        view = await api.wait_dispatched(request["request_id"])
        assert (await api.wait_run(view["run_id"]))["status"] == "completed"
        [call] = stub.requests[seen:]
        return call

    # a model with vision gets the images the message names, not the text file, not the rest
    content = _user_content(await ask("openai:seeing", [ids["dot.png"], ids["notes.txt"]]))
    assert isinstance(content, list)
    assert content[0] == {"type": "text", "text": "what is in it?"}
    [image] = content[1:]
    encoded = base64.b64encode(PNG).decode()
    assert image == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}}
    # without vision: the text alone (the prompt lists the files by path)
    assert _user_content(await ask("openai:blind", [ids["dot.png"]])) == "what is in it?"
    # an image sent in the run body is an attachment the message refers to
    seen = len(stub.requests)
    request = await api.submit(
        thread,
        "and this?",
        model_spec="openai:seeing",
        image_content=base64.b64encode(PNG).decode(),
    )
    view = await api.wait_dispatched(request["request_id"])
    await api.completed(view["run_id"])
    blocks = [c for c in _user_content(stub.requests[seen]) if c["type"] == "image_url"]
    assert len(blocks) == 1
    # the message keeps what it referred to, once
    metadata = await api.value(
        "SELECT metadata FROM yuxi.messages WHERE id = %s", request["message_id"]
    )
    assert len(metadata["attachments"]) == 1
    with pytest.raises(Exception, match="cannot be rewritten"):
        await api.sql(
            "UPDATE yuxi.messages SET metadata = '{\"attachments\": []}' WHERE id = %s",
            request["message_id"],
        )
    # another thread's attachment is refused and nothing is submitted
    other = await api.thread("alice")
    refused = await api.alice.post(
        "/api/agent/runs",
        json={"thread_id": other, "query": "steal", "attachments": [ids["dot.png"]]},
    )
    assert refused.status_code == 400 and "not attachments of this thread" in refused.text
    assert await api.value("SELECT count(*) FROM yuxi.messages WHERE thread_id = %s", other) == 0


async def test_json_replies_use_a_models_json_mode_or_the_prompt(
    api: Api, worker: None, stub: StubServer
) -> None:
    for spec, json_mode in (("openai:structured", True), ("openai:freeform", False)):
        created = await api.admin.post(
            "/api/models",
            json={
                "spec": spec,
                "name": spec,
                "base_url": stub.base_url,
                "api_key": PLATFORM_KEY,
                "capabilities": {"json_mode": json_mode, "function_calling": False},
            },
        )
        assert created.status_code == 201, created.text
    agent = await api.admin.post(
        "/api/agents",
        json={
            "slug": "json-bot",
            "name": "JSON bot",
            "backend_id": "chatbot",
            "config": {"context": {"model": "openai:structured", "response_format": "json"}},
        },
    )
    assert agent.status_code == 201, agent.text
    items = {i["key"]: i for i in agent.json()["configurable_items"]}
    assert items["response_format"]["kind"] == "select"
    assert items["response_format"]["options"] == ["text", "json"]
    refused = await api.admin.patch(
        "/api/agents/json-bot", json={"config": {"context": {"response_format": "yaml"}}}
    )
    assert refused.status_code == 400, refused.text

    thread = await api.thread("alice", agent="json-bot")
    calls = []
    for spec in ("openai:structured", "openai:freeform"):
        seen = len(stub.requests)
        await _run(api, "alice", thread, "give me data", spec)
        [call] = stub.requests[seen:]
        calls.append(call)
    structured, freeform = calls
    assert structured.body["response_format"] == {"type": "json_object"}
    assert "response_format" not in freeform.body
    for call in calls:
        system = call.body["messages"][0]["content"]
        text = system if isinstance(system, str) else "".join(p["text"] for p in system)
        assert "Reply with one JSON object and nothing else" in text
    # an agent replying in text asks for nothing
    seen = len(stub.requests)
    await _run(api, "alice", await api.thread("alice"), "hello", "openai:structured")
    assert "response_format" not in stub.requests[seen].body


async def test_a_provider_error_echoing_a_users_key_never_shows_it(
    api: Api, worker: None, stub: StubServer, caplog: pytest.LogCaptureFixture
) -> None:
    key = "sk-bob-echoed-key-99aa88bb77cc"
    created = await api.bob.post(
        "/api/me/models",
        json={"spec": "openai:echo-key", "name": "Echo", "base_url": stub.base_url, "api_key": key},
    )
    assert created.status_code == 201, created.text
    caplog.set_level("DEBUG")
    result = await _run(api, "bob", await api.thread("bob"), "hello", "openai:echo-key")
    assert result["status"] == "failed", result
    assert key not in json.dumps(result) and "bad credentials" in result["error"]["message"]
    events = await api.bob.get(f"/api/agent/runs/{result['run_id']}/events")
    assert key not in events.text
    assert key not in caplog.text
    stored = await api.sql(
        "SELECT error_message FROM yuxi.agent_runs WHERE run_id = %s", result["run_id"]
    )
    assert key not in stored[0][0]


async def test_usage_counts_a_summarisation_call_like_the_stub_reports_it(
    api: Api, worker: None, stub: StubServer
) -> None:
    created = await api.admin.post(
        "/api/models",
        json={
            "spec": "openai:summing",
            "name": "Summing",
            "base_url": stub.base_url,
            "api_key": PLATFORM_KEY,
            "capabilities": {"function_calling": False},
        },
    )
    assert created.status_code == 201, created.text
    agent = await api.admin.post(
        "/api/agents",
        json={
            "slug": "forgetful",
            "name": "Forgetful",
            "backend_id": "chatbot",
            "config": {
                "context": {
                    "model": "openai:summing",
                    "summary_threshold": 2,
                    "summary_keep_messages": 1,
                }
            },
        },
    )
    assert agent.status_code == 201, agent.text
    thread = await api.thread("alice", agent="forgetful")
    first = await _run(api, "alice", thread, "one", "openai:summing")
    assert first["status"] == "completed", first
    seen = len(stub.requests)
    # the history now passes the threshold: a summary call, then the answer
    second = await _run(api, "alice", thread, "two", "openai:summing")
    assert second["status"] == "completed", second
    calls = stub.requests[seen:]
    assert len(calls) == 2
    assert any("summar" in json.dumps(c.body["messages"]).lower() for c in calls)
    # every call reports 3 prompt and 5 completion tokens: both are counted
    assert second["usage"]["input_tokens"] == 3 * 2 and second["usage"]["output_tokens"] == 5 * 2
    assert first["usage"]["input_tokens"] == 3 and first["usage"]["output_tokens"] == 5
