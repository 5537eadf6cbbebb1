"""Submitting, steering, cancelling and continuing without a worker: the first run of a
thread stays pending (busy), so queue states are deterministic."""

from __future__ import annotations

import uuid

import pytest

from tests.api.conftest import REQUEST_VIEW_KEYS, Api, error_of

pytestmark = pytest.mark.asyncio(loop_scope="module")

RUN_KEYS = {
    "run_id",
    "thread_id",
    "request_id",
    "run_type",
    "created_by_run_id",
    "status",
    "error_type",
    "error_message",
    "timing",
    "usage",
    "attempt_count",
    "infra_retries",
}


async def test_submit_returns_a_request_view(api: Api) -> None:
    thread = await api.thread()
    response = await api.alice.post("/api/agent/runs", json={"thread_id": thread, "query": "hi"})
    assert response.status_code == 202, response.text
    first = response.json()
    assert set(first) == REQUEST_VIEW_KEYS
    assert first["thread_id"] == thread
    assert first["status"] == "dispatched" and first["queue_policy"] == "enqueue"
    assert first["queue_position"] is None
    assert isinstance(first["message_id"], int)
    assert first["stream_url"] == f"/api/agent/runs/{first['run_id']}/events"
    uuid.UUID(first["run_id"])
    assert first == await api.request(first["request_id"])

    second = await api.submit(thread, "behind")
    third = await api.submit(thread, "further behind", request_id="my-own.id:3")
    assert (second["status"], second["queue_position"]) == ("queued", 1)
    assert (third["status"], third["queue_position"]) == ("queued", 2)
    assert third["request_id"] == "my-own.id:3"
    for queued in (second, third):
        assert queued["run_id"] is None and queued["stream_url"] is None
        assert isinstance(queued["message_id"], int)

    queue = await api.queue(thread)
    assert set(queue) == {"requests", "queue"}
    assert [r["request_id"] for r in queue["requests"]] == [
        first["request_id"],
        second["request_id"],
        third["request_id"],
    ]
    assert queue["queue"] == {
        "status": "running",
        "paused_reason": None,
        "blocking_run_id": first["run_id"],
        "can_continue": False,
    }


async def test_run_view_result_and_missing_manifest_of_a_pending_run(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "pending")
    run = await api.run(info["run_id"])
    assert set(run) == RUN_KEYS
    assert run["run_id"] == info["run_id"] and run["thread_id"] == thread
    assert run["request_id"] == info["request_id"]
    assert (run["run_type"], run["created_by_run_id"], run["status"]) == ("chat", None, "pending")
    assert run["error_type"] is None and run["error_message"] is None
    assert run["timing"]["created_at"] and run["timing"]["started_at"] is None
    assert run["usage"] is None  # nothing recorded before the run's finish
    assert (run["attempt_count"], run["infra_retries"]) == (0, 0)

    assert await api.result(info["run_id"]) == {
        "status": "pending",
        "output": None,
        "final_message_id": None,
        "error": None,
        "usage": None,
    }
    error_of(await api.alice.get(f"/api/agent/runs/{info['run_id']}/manifest"), 404, "not_found")


async def test_unknown_runs_and_requests_are_404(api: Api) -> None:
    unknown = str(uuid.uuid4())
    for method, path, body in (
        ("GET", f"/api/agent/runs/{unknown}", None),
        ("GET", f"/api/agent/runs/{unknown}/result", None),
        ("GET", f"/api/agent/runs/{unknown}/manifest", None),
        ("GET", f"/api/agent/runs/{unknown}/events", None),
        ("POST", f"/api/agent/runs/{unknown}/cancel", None),
        ("POST", f"/api/agent/runs/{unknown}/resume", {"resume": "x"}),
        ("GET", "/api/agent/requests/no-such-request", None),
        ("POST", "/api/agent/requests/no-such-request/cancel", None),
        ("POST", "/api/agent/requests/no-such-request/steer", None),
    ):
        error_of(await api.alice.request(method, path, json=body), 404, "not_found")


async def test_resubmitting_a_request_id_returns_the_same_request(api: Api) -> None:
    thread = await api.thread()
    first = await api.submit(thread, "original", request_id="idem-1")
    queued = await api.submit(thread, "queued original", request_id="idem-2")
    again = await api.submit(
        thread,
        "different text",
        request_id="idem-1",
        queue_policy="reject",
        model_spec="builtin:scripted",
    )
    assert again == first
    again_queued = await api.submit(thread, "other", request_id="idem-2", queue_policy="steer")
    assert again_queued == queued
    history = await api.history(thread)
    assert [m["content"] for m in history["history"]] == ["original", "queued original"]
    assert len(history["runs"]) == 1


async def test_a_request_id_of_another_thread_is_409(api: Api) -> None:
    thread, other = await api.thread(), await api.thread()
    await api.submit(thread, "mine", request_id="taken-id")
    response = await api.alice.post(
        "/api/agent/runs", json={"thread_id": other, "query": "x", "request_id": "taken-id"}
    )
    error_of(response, 409, "request_id_conflict")
    bobs = await api.thread("bob")
    response = await api.bob.post(
        "/api/agent/runs", json={"thread_id": bobs, "query": "x", "request_id": "taken-id"}
    )
    error_of(response, 409, "request_id_conflict")
    assert (await api.history(other))["history"] == []


async def test_reject_policy(api: Api) -> None:
    thread = await api.thread()
    idle = await api.submit(thread, "idle thread accepts", queue_policy="reject")
    assert idle["status"] == "dispatched" and idle["run_id"]
    busy = await api.submit(thread, "busy thread rejects", queue_policy="reject")
    assert busy["status"] == "rejected"
    assert busy["run_id"] is None and busy["queue_position"] is None
    assert (await api.request(busy["request_id"]))["status"] == "rejected"
    assert [r["status"] for r in (await api.queue(thread))["requests"]] == [
        "dispatched",
        "rejected",
    ]


async def test_steer(api: Api) -> None:
    thread = await api.thread()
    head = await api.submit(thread, "running")
    plain = await api.submit(thread, "plain")
    steer = await api.submit(thread, "steer", queue_policy="steer")
    assert (steer["status"], steer["queue_policy"], steer["queue_position"]) == (
        "queued",
        "steer",
        1,
    )
    assert (await api.request(plain["request_id"]))["queue_position"] == 2

    # one pending steer per thread, by policy or by upgrade
    response = await api.alice.post(
        "/api/agent/runs", json={"thread_id": thread, "query": "x", "queue_policy": "steer"}
    )
    error_of(response, 409, "steer_already_pending")
    error_of(
        await api.alice.post(f"/api/agent/requests/{plain['request_id']}/steer"),
        409,
        "steer_already_pending",
    )
    # steering the running request, or a dispatched one
    error_of(
        await api.alice.post(f"/api/agent/requests/{head['request_id']}/steer"),
        409,
        "request_already_dispatched",
    )
    # steering an already-steer request returns it unchanged
    response = await api.alice.post(f"/api/agent/requests/{steer['request_id']}/steer")
    assert response.status_code == 200 and response.json() == await api.request(steer["request_id"])

    # after the pending steer is cancelled, the plain request can be upgraded
    cancelled = await api.alice.post(f"/api/agent/requests/{steer['request_id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    response = await api.alice.post(f"/api/agent/requests/{plain['request_id']}/steer")
    assert response.status_code == 200, response.text
    upgraded = response.json()
    assert upgraded["request_id"] == plain["request_id"]
    assert upgraded["message_id"] == plain["message_id"]
    assert (upgraded["queue_policy"], upgraded["queue_position"], upgraded["status"]) == (
        "steer",
        1,
        "queued",
    )
    # a cancelled request cannot be steered
    error_of(
        await api.alice.post(f"/api/agent/requests/{steer['request_id']}/steer"),
        409,
        "run_not_steerable",
    )


async def test_steer_needs_an_active_run(api: Api) -> None:
    thread = await api.thread()
    head = await api.submit(thread, "head")
    queued = await api.submit(thread, "queued")
    # a cancelled head pauses the backlog: nothing runs, so nothing can be steered
    await api.alice.post(f"/api/agent/runs/{head['run_id']}/cancel")
    error_of(
        await api.alice.post(f"/api/agent/requests/{queued['request_id']}/steer"),
        409,
        "run_not_steerable",
    )
    response = await api.alice.post(
        "/api/agent/runs", json={"thread_id": thread, "query": "x", "queue_policy": "steer"}
    )
    error_of(response, 409, "run_not_steerable")
    # a rejected request cannot be steered either
    rejected = await api.submit(thread, "no", queue_policy="reject")
    assert rejected["status"] == "rejected"
    error_of(
        await api.alice.post(f"/api/agent/requests/{rejected['request_id']}/steer"),
        409,
        "run_not_steerable",
    )


async def test_cancel_a_queued_request(api: Api) -> None:
    thread = await api.thread()
    head = await api.submit(thread, "head")
    queued = await api.submit(thread, "queued")
    later = await api.submit(thread, "later")
    response = await api.alice.post(f"/api/agent/requests/{queued['request_id']}/cancel")
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "cancelled" and response.json()["queue_position"] is None
    assert (await api.request(later["request_id"]))["queue_position"] == 1
    # again: unchanged
    response = await api.alice.post(f"/api/agent/requests/{queued['request_id']}/cancel")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    # a dispatched request is cancelled through its run
    error_of(
        await api.alice.post(f"/api/agent/requests/{head['request_id']}/cancel"),
        409,
        "request_already_dispatched",
    )
    statuses = {m["content"]: m["delivery_status"] for m in (await api.history(thread))["history"]}
    assert statuses == {"head": "dispatched", "queued": "cancelled", "later": "queued"}


async def test_cancel_a_pending_run_pauses_the_backlog_until_continued(api: Api) -> None:
    thread = await api.thread()
    head = await api.submit(thread, "head")
    queued = await api.submit(thread, "queued")

    error_of(await api.alice.post(f"/api/agent/thread/{thread}/requests/continue"), 409, "run_busy")
    response = await api.alice.post(f"/api/agent/runs/{head['run_id']}/cancel")
    assert response.status_code == 200
    assert response.json() == {"run_id": head["run_id"], "status": "cancelled"}
    # cancelling again is harmless
    again = await api.alice.post(f"/api/agent/runs/{head['run_id']}/cancel")
    assert again.status_code == 200 and again.json()["status"] == "cancelled"

    assert (await api.queue(thread))["queue"] == {
        "status": "paused",
        "paused_reason": "run_cancelled",
        "blocking_run_id": head["run_id"],
        "can_continue": True,
    }
    # submitting to a paused backlog queues
    behind = await api.submit(thread, "behind")
    assert behind["status"] == "queued" and behind["queue_position"] == 2

    response = await api.alice.post(f"/api/agent/thread/{thread}/requests/continue")
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"thread_id", "run_id", "queue"}
    assert body["thread_id"] == thread
    assert body["run_id"] == (await api.request(queued["request_id"]))["run_id"]
    assert body["queue"]["status"] == "running" and body["queue"]["can_continue"] is False
    error_of(await api.alice.post(f"/api/agent/thread/{thread}/requests/continue"), 409, "run_busy")


async def test_continue_without_a_pause_is_409(api: Api) -> None:
    thread = await api.thread()
    error_of(
        await api.alice.post(f"/api/agent/thread/{thread}/requests/continue"),
        409,
        "queue_not_paused",
    )
    head = await api.submit(thread, "head")
    await api.alice.post(f"/api/agent/runs/{head['run_id']}/cancel")
    # nothing was queued behind it: no pause
    assert (await api.queue(thread))["queue"]["status"] == "ready"
    error_of(
        await api.alice.post(f"/api/agent/thread/{thread}/requests/continue"),
        409,
        "queue_not_paused",
    )


async def test_resuming_a_run_that_is_not_interrupted_is_409(api: Api) -> None:
    thread = await api.thread()
    head = await api.submit(thread, "head")
    response = await api.alice.post(f"/api/agent/runs/{head['run_id']}/resume", json={"resume": 1})
    error_of(response, 409, "run_not_interrupted")


async def test_model_spec_and_approval_mode_are_accepted(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(
        thread, "q", model_spec="builtin:scripted", tool_approval_mode="ask", request_id="with-opts"
    )
    assert info["status"] == "dispatched"
    payload = await api.value(
        "SELECT input_payload FROM yuxi.agent_runs WHERE run_id = %s", info["run_id"]
    )
    assert payload["model_spec"] == "builtin:scripted"
    assert payload["tool_approval_mode"] == "ask"
