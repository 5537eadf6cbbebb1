"""A run's files are the conversation's workdir tree in the file store: an attachment
is read by a run, what it writes is viewed through the API, and what a subagent writes
lands in the parent conversation's tree and nowhere else (real HTTP, real worker)."""

from __future__ import annotations

import json
from uuid import UUID

import pytest

from tests.api.conftest import Api

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def stored(api: Api, thread_id: str, who: str = "alice") -> dict[str, bytes]:
    """The files of the thread's workdir tree and their bytes."""
    tree = await api.value("SELECT yuxi.thread_file_tree(%s, %s)", api.uids[who], UUID(thread_id))
    found: dict[str, bytes] = {}
    for path, content, chunks in await api.sql(
        "SELECT path, content_id, chunks FROM yuxi.file_list(%s)", tree
    ):
        pieces = await api.sql(
            "SELECT data FROM yuxi.file_chunks_read(%s, 0, %s)", content, chunks - 1
        )
        found[path] = b"".join(bytes(piece) for (piece,) in pieces)
    return found


async def run_to_end(api: Api, thread_id: str, query: str) -> str:
    request = await api.submit(thread_id, query)
    view = await api.wait_dispatched(request["request_id"])
    await api.completed(view["run_id"])
    return str((await api.result(view["run_id"]))["output"])


async def test_an_attachment_is_read_by_a_run_and_its_output_is_viewed(
    api: Api, worker: None
) -> None:
    thread = await api.thread()
    text = "第一行 first line\n".encode()
    response = await api.alice.post(
        f"/api/chat/thread/{thread}/attachments",
        files=[("file", ("notes.txt", text, "text/plain"))],
    )
    assert response.status_code == 201, response.text
    [attachment] = response.json()
    assert attachment["path"] == "uploads/notes.txt"

    output = await run_to_end(api, thread, '/tool read_file {"path": "uploads/notes.txt"}')
    assert output == "tool read_file returned: 第一行 first line\n"
    output = await run_to_end(
        api, thread, '/tool write_file {"path": "outputs/report.md", "content": "# Report\\nok"}'
    )
    assert output.startswith("tool write_file returned: wrote 11 bytes to outputs/report.md")
    assert await stored(api, thread) == {
        "uploads/notes.txt": text,
        "outputs/report.md": b"# Report\nok",
    }

    base = f"/api/chat/thread/{thread}"
    root = (await api.alice.get(f"{base}/files")).json()
    assert [(e["name"], e["kind"]) for e in root["entries"]] == [
        ("outputs", "directory"),
        ("uploads", "directory"),
    ]
    outputs = (await api.alice.get(f"{base}/files", params={"path": "outputs"})).json()
    [report] = outputs["entries"]
    assert report["path"] == "outputs/report.md" and report["kind"] == "file"
    assert report["bytes"] == 11 and report["media_type"] == "text/markdown"
    content = await api.alice.get(f"{base}/files/content", params={"path": "outputs/report.md"})
    assert content.status_code == 200 and content.content == b"# Report\nok"
    assert content.headers["content-type"] == "text/markdown; charset=utf-8"
    part = await api.alice.get(
        f"{base}/files/content",
        params={"path": "outputs/report.md"},
        headers={"Range": "bytes=2-7"},
    )
    assert part.status_code == 206 and part.content == b"Report"
    artifacts = (await api.alice.get(f"{base}/artifacts")).json()
    assert [a["path"] for a in artifacts["artifacts"]] == ["outputs/report.md"]

    state = (await api.alice.get(f"{base}/state")).json()["agent_state"]
    assert sorted(f["path"] for f in state["files"]) == ["outputs/report.md", "uploads/notes.txt"]
    assert [a["path"] for a in state["artifacts"]] == ["outputs/report.md"]
    assert state["subagent_runs"] == []
    for body in (root, outputs, artifacts, state):
        assert str(api.home) not in str(body)


async def test_a_subagents_file_lands_in_the_parent_conversations_workdir(
    api: Api, worker: None
) -> None:
    # scribe: a subagent with the default tools (write_file among them)
    response = await api.admin.post(
        "/api/agents",
        json={
            "slug": "scribe",
            "name": "Scribe",
            "backend_id": "subagent",
            "is_subagent": True,
            "config": {"context": {"model": "builtin:scripted"}},
        },
    )
    assert response.status_code == 201, response.text
    write = "/tool write_file " + json.dumps(
        {"path": "outputs/child.md", "content": "from the child"}
    )
    thread = await api.thread()
    run = await api.submit(
        thread, "/tool task " + json.dumps({"subagent": "scribe", "description": write})
    )
    await api.completed(run["run_id"])
    answer = (await api.result(run["run_id"]))["output"]
    assert answer == (
        "tool task returned: tool write_file returned: wrote 14 bytes to outputs/child.md"
    )
    assert await stored(api, thread) == {"outputs/child.md": b"from the child"}
    # in no other tree of anyone's
    everywhere = await api.sql(
        "SELECT t.kind, t.root, f.path FROM yuxi.files f"
        " JOIN yuxi.file_trees t ON t.id = f.tree_id WHERE f.path LIKE '%%child.md'"
    )
    assert everywhere == [("workdir", f"threads/{thread}", "outputs/child.md")]
    # and the API shows it
    viewed = await api.alice.get(
        f"/api/chat/thread/{thread}/files/content", params={"path": "outputs/child.md"}
    )
    assert viewed.status_code == 200 and viewed.content == b"from the child"
