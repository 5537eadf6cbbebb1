"""Another user's threads, runs and requests are 404 on every method, and unchanged."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from tests.api.conftest import Api, error_of

pytestmark = pytest.mark.asyncio(loop_scope="module")

# a 1x1 PNG
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwAD"
    "hgGAWjR9awAAAABJRU5ErkJggg=="
)


@dataclass
class Alices:
    thread: str
    run: str
    dispatched: str
    queued: str
    project: str
    attachment: str


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def alices(api: Api) -> AsyncIterator[Alices]:
    project = (await api.alice.post("/api/projects", json={"name": "alice's"})).json()["id"]
    thread = await api.thread(project_id=project)
    head = await api.submit(thread, "alice's first", request_id="alice-head")
    queued = await api.submit(thread, "alice's second", request_id="alice-queued")
    attached = await api.alice.post(
        f"/api/chat/thread/{thread}/attachments",
        files=[("file", ("alice's.txt", b"alice's notes", "text/plain"))],
    )
    assert attached.status_code == 201, attached.text
    yield Alices(
        thread,
        head["run_id"],
        head["request_id"],
        queued["request_id"],
        project,
        attached.json()[0]["id"],
    )


def endpoints(a: Alices) -> list[tuple[str, str, dict[str, Any] | None]]:
    return [
        # threads
        ("GET", f"/api/chat/thread/{a.thread}/history", None),
        ("POST", f"/api/chat/thread/{a.thread}/viewed", None),
        ("GET", f"/api/chat/thread/{a.thread}/state", None),
        ("DELETE", f"/api/chat/thread/{a.thread}", None),
        ("GET", f"/api/agent/thread/{a.thread}/requests", None),
        ("POST", f"/api/agent/thread/{a.thread}/requests/continue", None),
        ("POST", "/api/agent/runs", {"thread_id": a.thread, "query": "from bob"}),
        (
            "POST",
            "/api/agent/runs",
            {"thread_id": a.thread, "query": "x", "request_id": "alice-head"},
        ),
        # files
        ("GET", f"/api/chat/thread/{a.thread}/attachments", None),
        ("POST", f"/api/chat/thread/{a.thread}/attachments", None),
        ("DELETE", f"/api/chat/thread/{a.thread}/attachments/{a.attachment}", None),
        ("GET", f"/api/chat/thread/{a.thread}/files", None),
        ("GET", f"/api/chat/thread/{a.thread}/files?path=uploads", None),
        ("GET", f"/api/chat/thread/{a.thread}/files/content?path=uploads/alice's.txt", None),
        ("GET", f"/api/chat/thread/{a.thread}/artifacts", None),
        (
            "POST",
            "/api/agent/runs",
            {"thread_id": a.thread, "query": "x", "image_content": PNG},
        ),
        # runs
        ("GET", f"/api/agent/runs/{a.run}", None),
        ("GET", f"/api/agent/runs/{a.run}/result", None),
        ("GET", f"/api/agent/runs/{a.run}/manifest", None),
        ("GET", f"/api/agent/runs/{a.run}/events", None),
        ("POST", f"/api/agent/runs/{a.run}/cancel", None),
        ("POST", f"/api/agent/runs/{a.run}/resume", {"resume": "x"}),
        ("POST", f"/api/agent/runs/{a.run}/resume", {"resume": "x", "request_id": "bob-res"}),
        # requests
        ("GET", f"/api/agent/requests/{a.dispatched}", None),
        ("GET", f"/api/agent/requests/{a.queued}", None),
        ("POST", f"/api/agent/requests/{a.queued}/cancel", None),
        ("POST", f"/api/agent/requests/{a.dispatched}/cancel", None),
        ("POST", f"/api/agent/requests/{a.queued}/steer", None),
        ("POST", f"/api/agent/requests/{a.dispatched}/steer", None),
        # projects
        ("POST", "/api/chat/thread", {"agent_id": "chatbot", "project_id": a.project}),
    ]


async def test_bob_gets_404_for_everything_of_alices(api: Api, alices: Alices) -> None:
    for method, path, body in endpoints(alices):
        response = await api.bob.request(method, path, json=body)
        error_of(response, 404, "not_found")
        # the message does not leak alice's content
        assert "alice's" not in response.text


async def test_bob_changed_nothing(api: Api, alices: Alices) -> None:
    for method, path, body in endpoints(alices):
        await api.bob.request(method, path, json=body)
    history = await api.history(alices.thread)
    assert history["thread"]["thread_status"] == "loading"
    assert [m["content"] for m in history["history"]] == ["alice's first", "alice's second"]
    assert [r["status"] for r in history["runs"]] == ["pending"]
    queued = await api.request(alices.queued)
    assert (queued["status"], queued["queue_policy"], queued["queue_position"]) == (
        "queued",
        "enqueue",
        1,
    )
    assert alices.thread in [t["id"] for t in (await api.alice.get("/api/chat/threads")).json()]
    assert alices.thread not in [t["id"] for t in (await api.bob.get("/api/chat/threads")).json()]
    assert alices.project not in [p["id"] for p in (await api.bob.get("/api/projects")).json()]
    # alice's files are as she left them, and bob has none
    [attachment] = (await api.alice.get(f"/api/chat/thread/{alices.thread}/attachments")).json()
    assert attachment["id"] == alices.attachment
    files = await api.sql(
        "SELECT t.owner_uid, f.path FROM yuxi.files f JOIN yuxi.file_trees t ON t.id = f.tree_id"
    )
    assert files == [(api.uids["alice"], "uploads/alice's.txt")]


async def test_alice_still_reaches_all_of_it(api: Api, alices: Alices) -> None:
    for path in (
        f"/api/chat/thread/{alices.thread}/history",
        f"/api/chat/thread/{alices.thread}/state",
        f"/api/agent/thread/{alices.thread}/requests",
        f"/api/agent/runs/{alices.run}",
        f"/api/agent/runs/{alices.run}/result",
        f"/api/agent/requests/{alices.queued}",
        f"/api/chat/thread/{alices.thread}/files?path=uploads",
        f"/api/chat/thread/{alices.thread}/files/content?path=uploads/alice's.txt",
        f"/api/chat/thread/{alices.thread}/artifacts",
    ):
        assert (await api.alice.get(path)).status_code == 200, path
