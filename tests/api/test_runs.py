"""Runs executed by an in-process worker, driven and read over HTTP."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from tests.api.conftest import FINAL, Api, error_of
from yuxi.runtime.manifest import manifest_fingerprint

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.usefixtures("worker")]


async def drained(api: Api, thread: str, runs: int, within: float = 30.0) -> dict[str, Any]:
    """Waits until the thread has ``runs`` runs, all finished, and nothing queued."""
    deadline = time.monotonic() + within
    while True:
        history = await api.history(thread)
        queue = await api.queue(thread)
        done = [r for r in history["runs"] if r["status"] in FINAL]
        queued = [r for r in queue["requests"] if r["status"] == "queued"]
        if len(history["runs"]) == runs and len(done) == runs and not queued:
            return history
        if time.monotonic() > deadline:
            raise AssertionError(f"thread {thread} not drained: {history['runs']}, {queue}")
        await asyncio.sleep(0.05)


def replies(history: dict[str, Any]) -> list[str]:
    return [m["content"] for m in history["history"] if m["role"] == "assistant"]


async def test_health_counts_the_worker(api: Api) -> None:
    body = (await api.anon.get("/api/system/health")).json()
    assert body == {
        "status": "ok",
        "database": "ok",
        "workers": body["workers"],
        "vector_indexing": body["vector_indexing"],
        "vector_search": body["vector_search"],
    }
    assert body["workers"] >= 1
    assert isinstance(body["vector_indexing"], bool)


async def test_echo_result_and_run_view(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "hello there")
    run = await api.completed(info["run_id"])
    assert run["error_type"] is None and run["error_message"] is None
    timing = run["timing"]
    assert timing["created_at"] <= timing["started_at"] <= timing["finished_at"]
    result = await api.result(info["run_id"])
    assert result["status"] == "completed" and result["error"] is None
    assert result["output"] == "echo: hello there"
    final = [
        m for m in (await api.history(thread))["history"] if m["id"] == result["final_message_id"]
    ]
    assert final and final[0]["role"] == "assistant" and final[0]["content"] == result["output"]
    assert final[0]["run_id"] == info["run_id"]


async def test_manifest_after_completion(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "manifest please")
    await api.completed(info["run_id"])
    response = await api.alice.get(f"/api/agent/runs/{info['run_id']}/manifest")
    assert response.status_code == 200, response.text
    manifest = response.json()
    assert manifest["version"] == 2
    assert manifest["agent"] == {"slug": "chatbot", "backend_id": "chatbot"}
    assert manifest["model"] == "builtin:scripted"
    # the committed manifest, as stored: it hashes to the stored fingerprint, which is
    # not itself part of the response
    stored = await api.value(
        "SELECT manifest_fingerprint FROM yuxi.agent_runs WHERE run_id = %s", info["run_id"]
    )
    assert manifest_fingerprint(manifest) == stored
    # ... and the response shows it as its ETag (the body is write-once)
    assert response.headers["etag"] == f'"{stored}"'
    text = json.dumps(manifest)
    assert stored not in text and "fingerprint" not in text
    for secret in (*api.tokens.values(), "api_key", "password", "secret"):
        assert secret not in text
    # identity is excluded
    assert str(api.uids["alice"]) not in text and thread not in text


async def test_ten_rapid_submits_drain_in_order(api: Api) -> None:
    thread = await api.thread()
    infos = [await api.submit(thread, f"message {i}") for i in range(10)]
    history = await drained(api, thread, 10)
    assert replies(history) == [f"echo: message {i}" for i in range(10)]
    assert [r["status"] for r in history["runs"]] == ["completed"] * 10
    # runs were created in submission order, one per request
    assert [r["request_id"] for r in history["runs"]] == [i["request_id"] for i in infos]
    # each assistant reply belongs to the run of its request
    by_run = {r["run_id"]: r["request_id"] for r in history["runs"]}
    for message in history["history"]:
        assert by_run[message["run_id"]] == message["request_id"]


async def test_steered_request_runs_next(api: Api) -> None:
    thread = await api.thread()
    head = await api.submit(thread, "/sleep 1")
    plain = await api.submit(thread, "plain")
    steered = await api.submit(thread, "steered")
    response = await api.alice.post(f"/api/agent/requests/{steered['request_id']}/steer")
    assert response.status_code == 200, response.text
    assert response.json()["queue_position"] == 1
    by_policy = await api.submit(thread, "too late to steer")
    history = await drained(api, thread, 4)
    assert replies(history) == [
        "slept 1",
        "echo: steered",
        "echo: plain",
        "echo: too late to steer",
    ]
    error_of(
        await api.alice.post(f"/api/agent/requests/{plain['request_id']}/steer"),
        409,
        "request_already_dispatched",
    )
    assert head["status"] == "dispatched" and by_policy["status"] == "queued"


async def test_steer_policy_while_running(api: Api) -> None:
    thread = await api.thread()
    head = await api.submit(thread, "/sleep 1")
    await api.wait_run(head["run_id"], {"running"})
    await api.submit(thread, "queued first")
    steer = await api.submit(thread, "cut in", queue_policy="steer")
    assert (steer["status"], steer["queue_position"]) == ("queued", 1)
    history = await drained(api, thread, 3)
    assert replies(history) == ["slept 1", "echo: cut in", "echo: queued first"]


async def test_reject_while_running(api: Api) -> None:
    thread = await api.thread()
    head = await api.submit(thread, "/sleep 30")
    await api.wait_run(head["run_id"], {"running"})
    rejected = await api.submit(thread, "not now", queue_policy="reject")
    assert rejected["status"] == "rejected" and rejected["run_id"] is None
    await api.alice.post(f"/api/agent/runs/{head['run_id']}/cancel")
    await api.wait_run(head["run_id"])


async def test_cancel_a_running_run(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "/sleep 30")
    await api.wait_run(info["run_id"], {"running"})
    await asyncio.sleep(0.3)  # inside the model's sleep
    started = time.monotonic()
    response = await api.alice.post(f"/api/agent/runs/{info['run_id']}/cancel")
    assert response.status_code == 200, response.text
    assert response.json()["status"] in ("cancel_requested", "cancelled")
    run = await api.wait_run(info["run_id"], within=10)
    assert run["status"] == "cancelled"
    assert time.monotonic() - started < 3.0
    result = await api.result(info["run_id"])
    assert result["status"] == "cancelled" and result["output"] is None
    # cancelling a finished run changes nothing
    again = await api.alice.post(f"/api/agent/runs/{info['run_id']}/cancel")
    assert again.status_code == 200 and again.json()["status"] == "cancelled"
    # nothing was queued behind it, so the thread takes new work at once
    follow = await api.submit(thread, "after the cancel")
    assert follow["status"] == "dispatched"
    await api.completed(follow["run_id"])


async def test_a_failed_run_pauses_the_backlog_until_continued(api: Api) -> None:
    thread = await api.thread()
    await api.submit(thread, "/sleep 0.3")
    failing = await api.submit(thread, "/fail the model broke")
    behind = await api.submit(thread, "behind the failure")
    failed_run = (await api.wait_dispatched(failing["request_id"]))["run_id"]
    run = await api.wait_run(failed_run)
    assert run["status"] == "failed"
    assert run["error_type"] == "ScriptedModelError"
    assert "the model broke" in run["error_message"]
    result = await api.result(failed_run)
    assert result["status"] == "failed" and result["output"] is None
    assert result["final_message_id"] is None
    assert result["error"]["type"] == "ScriptedModelError"
    assert "the model broke" in result["error"]["message"]

    queue = await api.queue(thread)
    assert queue["queue"] == {
        "status": "paused",
        "paused_reason": "run_failed",
        "blocking_run_id": failed_run,
        "can_continue": True,
    }
    assert [r["status"] for r in queue["requests"]] == ["dispatched", "dispatched", "queued"]
    # a steer cannot jump a paused backlog
    response = await api.alice.post(
        "/api/agent/runs", json={"thread_id": thread, "query": "x", "queue_policy": "steer"}
    )
    error_of(response, 409, "run_not_steerable")

    response = await api.alice.post(f"/api/agent/thread/{thread}/requests/continue")
    assert response.status_code == 200, response.text
    next_run = response.json()["run_id"]
    assert next_run == (await api.request(behind["request_id"]))["run_id"]
    await api.completed(next_run)
    assert (await api.result(next_run))["output"] == "echo: behind the failure"
    error_of(
        await api.alice.post(f"/api/agent/thread/{thread}/requests/continue"),
        409,
        "queue_not_paused",
    )
    assert (await api.queue(thread))["queue"]["status"] == "ready"


async def test_ask_interrupt_and_resume(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "/ask What is your name?")
    run = await api.wait_run(info["run_id"])
    assert run["status"] == "interrupted"

    state = (await api.alice.get(f"/api/chat/thread/{thread}/state")).json()
    assert state["interrupt"] is not None
    assert state["interrupt"]["value"]["question"] == "What is your name?"
    assert isinstance(state["interrupt"]["id"], str)

    # the thread waits for the answer: a new message is refused
    response = await api.alice.post(
        "/api/agent/runs", json={"thread_id": thread, "query": "something else"}
    )
    error_of(response, 409, "run_interrupted")
    error_of(await api.alice.post(f"/api/agent/thread/{thread}/requests/continue"), 409, "run_busy")
    # a request id already used elsewhere cannot name the resume
    response = await api.alice.post(
        f"/api/agent/runs/{info['run_id']}/resume",
        json={"resume": "Ada", "request_id": info["request_id"]},
    )
    error_of(response, 409, "request_id_conflict")

    response = await api.alice.post(
        f"/api/agent/runs/{info['run_id']}/resume", json={"resume": "Ada", "request_id": "answer-1"}
    )
    assert response.status_code == 202, response.text
    resumed = response.json()
    assert resumed["request_id"] == "answer-1" and resumed["status"] == "dispatched"
    assert resumed["run_id"] != info["run_id"]
    assert resumed["stream_url"] == f"/api/agent/runs/{resumed['run_id']}/events"
    # idempotent: the same request id, or the same answer without one, returns the resume
    for body in ({"resume": "other", "request_id": "answer-1"}, {"resume": "Ada"}):
        again = await api.alice.post(f"/api/agent/runs/{info['run_id']}/resume", json=body)
        assert again.status_code == 202 and again.json() == resumed
    # another answer without a request id is not a re-send: superseded, nothing created
    response = await api.alice.post(
        f"/api/agent/runs/{info['run_id']}/resume", json={"resume": "other"}
    )
    assert "another answer" in error_of(response, 409, "resume_superseded")["message"]
    # another request id: superseded
    response = await api.alice.post(
        f"/api/agent/runs/{info['run_id']}/resume", json={"resume": "Bob", "request_id": "answer-2"}
    )
    error_of(response, 409, "resume_superseded")

    await api.completed(resumed["run_id"])
    resume_run = await api.run(resumed["run_id"])
    assert (resume_run["run_type"], resume_run["created_by_run_id"]) == ("resume", info["run_id"])
    assert (await api.result(resumed["run_id"]))["output"] == "you answered: Ada"
    state = (await api.alice.get(f"/api/chat/thread/{thread}/state")).json()
    assert state["interrupt"] is None

    response = await api.alice.post(
        f"/api/agent/runs/{resumed['run_id']}/resume", json={"resume": "again"}
    )
    error_of(response, 409, "run_not_interrupted")

    runs = (await api.history(thread))["runs"]
    assert [(r["run_type"], r["status"]) for r in runs] == [
        ("chat", "interrupted"),
        ("resume", "completed"),
    ]
    assert runs[1]["created_by_run_id"] == info["run_id"]
    # the thread takes new messages again
    follow = await api.submit(thread, "thanks")
    await api.completed(follow["run_id"])


@pytest.mark.parametrize("request_id", ["", "has space"], ids=repr)
async def test_a_resume_with_a_bad_request_id_is_400(api: Api, request_id: str) -> None:
    """Once a 500: run_resume did not check the format (a CHECK constraint caught it)."""
    thread = await api.thread()
    info = await api.submit(thread, "/ask Really?")
    assert (await api.wait_run(info["run_id"]))["status"] == "interrupted"
    response = await api.alice.post(
        f"/api/agent/runs/{info['run_id']}/resume", json={"resume": "y", "request_id": request_id}
    )
    error_of(response, 400)


async def test_tool_approval(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(
        thread, '/tool calculator {"expression": "6*7"}', tool_approval_mode="ask"
    )
    assert (await api.wait_run(info["run_id"]))["status"] == "interrupted"
    state = (await api.alice.get(f"/api/chat/thread/{thread}/state")).json()
    requests = state["interrupt"]["value"]["action_requests"]
    assert (requests[0]["name"], requests[0]["args"]) == ("calculator", {"expression": "6*7"})

    response = await api.alice.post(
        f"/api/agent/runs/{info['run_id']}/resume", json={"resume": {"decision": "approve"}}
    )
    assert response.status_code == 202, response.text
    resumed = response.json()
    await api.completed(resumed["run_id"])
    assert (await api.result(resumed["run_id"]))["output"] == "tool calculator returned: 42"
    # the resume inherited the approval mode
    payload = await api.value(
        "SELECT input_payload FROM yuxi.agent_runs WHERE run_id = %s", resumed["run_id"]
    )
    assert payload["tool_approval_mode"] == "ask"
    roles = [m["role"] for m in (await api.history(thread))["history"]]
    assert roles[0] == "user" and "tool" in roles and roles[-1] == "assistant"


async def test_tools_run_without_approval_by_default(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, '/tool calculator {"expression": "2+3"}')
    await api.completed(info["run_id"])
    assert (await api.result(info["run_id"]))["output"] == "tool calculator returned: 5"


async def test_viewed_semantics(api: Api) -> None:
    thread = await api.thread()
    assert (await api.history(thread))["thread"]["thread_status"] == "done"
    info = await api.submit(thread, "/sleep 0.5")
    assert (await api.history(thread))["thread"]["thread_status"] == "loading"
    await api.completed(info["run_id"])
    # finished since last viewed; reading history does not change that
    for _ in range(2):
        assert (await api.history(thread))["thread"]["thread_status"] == "ready"
    viewed = await api.alice.post(f"/api/chat/thread/{thread}/viewed")
    assert viewed.status_code == 200 and viewed.json()["thread_status"] == "done"
    assert (await api.history(thread))["thread"]["thread_status"] == "done"
    listed = {t["id"]: t for t in (await api.alice.get("/api/chat/threads")).json()}
    assert listed[thread]["thread_status"] == "done"
    # a new run: loading, then ready again
    info = await api.submit(thread, "again")
    assert (await api.history(thread))["thread"]["thread_status"] in ("loading", "ready")
    await api.completed(info["run_id"])
    assert (await api.history(thread))["thread"]["thread_status"] == "ready"


async def test_viewing_while_loading_still_shows_ready_after_the_run_finishes(api: Api) -> None:
    """Once failed: viewing marked the running run as seen, so it finished `done`."""
    thread = await api.thread()
    info = await api.submit(thread, "/sleep 0.5")
    viewed = await api.alice.post(f"/api/chat/thread/{thread}/viewed")
    assert viewed.json()["thread_status"] == "loading"
    await api.completed(info["run_id"])
    assert (await api.history(thread))["thread"]["thread_status"] == "ready"


async def test_history_lists_runs_of_every_status(api: Api) -> None:
    thread = await api.thread()
    ok = await api.submit(thread, "fine")
    await api.completed(ok["run_id"])
    bad = await api.submit(thread, "/fail nope")
    assert (await api.wait_run(bad["run_id"]))["status"] == "failed"
    slow = await api.submit(thread, "/sleep 30")
    await api.wait_run(slow["run_id"], {"running"})

    history = await api.history(thread)
    assert history["thread"]["thread_status"] == "loading"
    runs = history["runs"]
    assert [r["run_id"] for r in runs] == [ok["run_id"], bad["run_id"], slow["run_id"]]
    assert [r["status"] for r in runs] == ["completed", "failed", "running"]
    created = [r["timing"]["created_at"] for r in runs]
    assert created == sorted(created)
    assert runs[2]["timing"]["started_at"] and runs[2]["timing"]["finished_at"] is None
    messages = history["history"]
    assert [m["id"] for m in messages] == sorted(m["id"] for m in messages)
    assert [(m["role"], m["run_id"]) for m in messages] == [
        ("user", ok["run_id"]),
        ("assistant", ok["run_id"]),
        ("user", bad["run_id"]),
        ("user", slow["run_id"]),
    ]
    assert [m["delivery_status"] for m in messages if m["role"] == "user"] == [
        "complete",
        "failed",
        "dispatched",
    ]

    await api.alice.post(f"/api/agent/runs/{slow['run_id']}/cancel")
    assert (await api.wait_run(slow["run_id"]))["status"] == "cancelled"
    history = await api.history(thread)
    assert [r["status"] for r in history["runs"]] == ["completed", "failed", "cancelled"]
    assert history["thread"]["thread_status"] == "ready"
    assert [m["delivery_status"] for m in history["history"] if m["role"] == "user"] == [
        "complete",
        "failed",
        "cancelled",
    ]
