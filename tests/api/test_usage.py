"""Token usage recorded with each run's finish, over HTTP with a real worker and the
scripted model's deterministic counts (one token per word)."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api, error_of

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def _run(api: Api, thread: str, query: str, who: str = "alice") -> str:
    request = await api.submit(thread, query, who=who)
    view = await api.wait_dispatched(request["request_id"], who=who)
    await api.wait_run(view["run_id"], who=who)
    return str(view["run_id"])


async def test_a_runs_usage_is_recorded_and_shown(api: Api, worker: None) -> None:
    thread = await api.thread()
    run_id = await _run(api, thread, "one two three")
    result = await api.result(run_id)
    assert result["output"] == "echo: one two three"
    usage = result["usage"]
    # the system prompt's words count as input too: at least the 3 words sent
    assert usage["input_tokens"] >= 3 and usage["output_tokens"] == 4  # "echo: one two three"
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["cost"] is None  # builtin:scripted has no registry prices
    [by_model] = usage["by_model"]
    assert by_model["model"] == "builtin:scripted" and by_model["output_tokens"] == 4
    assert (await api.run(run_id))["usage"] == usage
    stored = await api.sql(
        "SELECT model, input_tokens, output_tokens FROM yuxi.run_usage WHERE run_id = %s", run_id
    )
    assert stored == [("builtin:scripted", usage["input_tokens"], 4)]

    # a tool call and its answer: two model calls, added up
    second = await _run(api, thread, '/tool calculator {"expression": "2+3"}')
    two_calls = (await api.result(second))["usage"]
    assert two_calls["output_tokens"] == (1 + 2) + len(["tool", "calculator", "returned:", "5"])

    total = (await api.alice.get(f"/api/agent/threads/{thread}/usage")).json()
    assert total["output_tokens"] == 4 + two_calls["output_tokens"]
    assert total["input_tokens"] == usage["input_tokens"] + two_calls["input_tokens"]
    error_of(await api.bob.get(f"/api/agent/threads/{thread}/usage"), 404, "not_found")

    report = (await api.alice.get("/api/usage")).json()
    [today] = [e for e in report["usage"] if e["model"] == "builtin:scripted"]
    assert today["runs"] == 2 and today["output_tokens"] == total["output_tokens"]
    assert today["uid"] == str(api.uids["alice"])
    assert (await api.bob.get("/api/usage")).json()["usage"] == []
    error_of(await api.bob.get("/api/usage", params={"all": "true"}), 403, "forbidden")
    everyone = (await api.admin.get("/api/usage", params={"all": "true"})).json()
    assert str(api.uids["alice"]) in {e["uid"] for e in everyone["usage"]}
    bad = await api.alice.get(
        "/api/usage", params={"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}
    )
    error_of(bad, 400, "invalid_input")


async def test_a_run_without_a_model_call_records_nothing(api: Api, worker: None) -> None:
    thread = await api.thread()
    request = await api.submit(thread, "/sleep 30")
    view = await api.wait_dispatched(request["request_id"])
    await api.wait_run(view["run_id"], {"running"})
    await api.alice.post(f"/api/agent/runs/{view['run_id']}/cancel")
    await api.wait_run(view["run_id"])
    assert (await api.result(view["run_id"]))["usage"] is None
