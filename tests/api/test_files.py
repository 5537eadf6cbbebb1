"""Attachments, the workdir viewer and artifacts over real HTTP, with a real worker."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import Api, error_of

pytestmark = pytest.mark.asyncio(loop_scope="module")

FILE_LIMIT = 64 * 1024
THREAD_LIMIT = 160 * 1024
API_SETTINGS = {"attachment_max_bytes": FILE_LIMIT, "thread_attachments_max_bytes": THREAD_LIMIT}
# a 1x1 PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def workdir(api: Api, thread_id: str, who: str = "alice") -> Path:
    return api.home / "workspaces" / str(api.uids[who]) / "threads" / thread_id


async def upload(
    api: Api, thread_id: str, *files: tuple[str, bytes], who: str = "alice"
) -> httpx.Response:
    parts = [("file", (name, data, "application/octet-stream")) for name, data in files]
    return await api.clients[who].post(f"/api/chat/thread/{thread_id}/attachments", files=parts)


async def uploaded(api: Api, thread_id: str, *files: tuple[str, bytes]) -> list[dict[str, Any]]:
    response = await upload(api, thread_id, *files)
    assert response.status_code == 201, response.text
    return list(response.json())


async def run_to_end(api: Api, thread_id: str, query: str) -> str:
    request = await api.submit(thread_id, query)
    view = await api.wait_dispatched(request["request_id"])
    await api.completed(view["run_id"])
    return str((await api.result(view["run_id"]))["output"])


async def test_an_attachment_is_read_by_a_run_and_its_output_is_viewed(
    api: Api, worker: None
) -> None:
    thread = await api.thread()
    [attachment] = await uploaded(api, thread, ("notes.txt", "第一行 first line\n".encode()))
    assert attachment["path"] == "uploads/notes.txt" and attachment["filename"] == "notes.txt"
    assert attachment["bytes"] == len("第一行 first line\n".encode())
    assert attachment["sha256"] == hashlib.sha256("第一行 first line\n".encode()).hexdigest()
    assert attachment["media_type"] == "text/plain" and attachment["created"] is True
    assert (workdir(api, thread) / "uploads" / "notes.txt").read_text() == "第一行 first line\n"

    listed = (await api.alice.get(f"/api/chat/thread/{thread}/attachments")).json()
    assert [a["id"] for a in listed] == [attachment["id"]]

    output = await run_to_end(api, thread, '/tool read_file {"path": "uploads/notes.txt"}')
    assert output == "tool read_file returned: 第一行 first line\n"
    output = await run_to_end(
        api, thread, '/tool write_file {"path": "outputs/report.md", "content": "# Report\\nok"}'
    )
    assert output.startswith("tool write_file returned: wrote 11 bytes to outputs/report.md")

    root = (await api.alice.get(f"/api/chat/thread/{thread}/files")).json()
    assert root["path"] == "." and root["truncated"] is False
    assert [(e["name"], e["kind"]) for e in root["entries"]] == [
        ("outputs", "directory"),
        ("uploads", "directory"),
    ]
    outputs = (
        await api.alice.get(f"/api/chat/thread/{thread}/files", params={"path": "outputs"})
    ).json()
    [report] = outputs["entries"]
    assert report["path"] == "outputs/report.md" and report["kind"] == "file"
    assert report["bytes"] == 11 and report["media_type"] == "text/markdown"

    content = await api.alice.get(
        f"/api/chat/thread/{thread}/files/content", params={"path": "outputs/report.md"}
    )
    assert content.status_code == 200 and content.content == b"# Report\nok"
    assert content.headers["content-type"] == "text/markdown; charset=utf-8"
    assert content.headers["content-disposition"].startswith('inline; filename="report.md"')
    assert content.headers["x-content-type-options"] == "nosniff"
    assert content.headers["content-security-policy"].startswith("sandbox")
    download = await api.alice.get(
        f"/api/chat/thread/{thread}/files/content",
        params={"path": "uploads/notes.txt", "download": "true"},
    )
    assert download.headers["content-disposition"].startswith("attachment;")

    artifacts = (await api.alice.get(f"/api/chat/thread/{thread}/artifacts")).json()
    assert [a["path"] for a in artifacts["artifacts"]] == ["outputs/report.md"]

    state = (await api.alice.get(f"/api/chat/thread/{thread}/state")).json()["agent_state"]
    assert sorted(f["path"] for f in state["files"]) == ["outputs/report.md", "uploads/notes.txt"]
    assert [a["path"] for a in state["artifacts"]] == ["outputs/report.md"]
    assert state["subagent_runs"] == []
    # no host path anywhere in what the client was sent
    for body in (root, outputs, artifacts, state, listed):
        assert str(api.home) not in str(body)


async def test_names_are_sanitised_and_kept_apart(api: Api) -> None:
    thread = await api.thread()
    first = await uploaded(api, thread, ("../../evil.txt", b"one"), ("a.txt", b"A"))
    assert [a["path"] for a in first] == ["uploads/evil.txt", "uploads/a.txt"]
    again = await uploaded(api, thread, ("evil.txt", b"one"))  # same name, same bytes
    assert again[0]["id"] == first[0]["id"] and again[0]["created"] is False
    other = await uploaded(api, thread, ("evil.txt", b"two"))  # same name, other bytes
    assert other[0]["path"] == "uploads/evil (2).txt"
    hidden = await uploaded(api, thread, (".bashrc", b"x"), (" ...", b"y"))
    assert [a["filename"] for a in hidden] == ["bashrc", "file"]
    long = await uploaded(api, thread, ("n" * 400 + ".pdf", b"%PDF"))
    assert long[0]["filename"].endswith(".pdf") and len(long[0]["filename"].encode()) <= 255
    assert long[0]["media_type"] == "application/pdf"
    # a file the agent wrote in uploads/ is never overwritten
    (workdir(api, thread) / "uploads" / "mine.txt").write_text("agent's")
    mine = await uploaded(api, thread, ("mine.txt", b"user's"))
    assert mine[0]["filename"] == "mine (2).txt"
    assert (workdir(api, thread) / "uploads" / "mine.txt").read_text() == "agent's"
    # nothing was written anywhere but uploads/
    written = sorted(p.name for p in api.home.rglob("*") if p.is_file() and "evil" in p.name)
    assert written == ["evil (2).txt", "evil.txt"]
    assert all(p.parent.name == "uploads" for p in api.home.rglob("evil*"))
    on_disk = sorted(os.listdir(workdir(api, thread) / "uploads"))
    assert not [n for n in on_disk if n.startswith(".upload-")]  # no staging file left


async def test_limits_give_413_and_keep_nothing(api: Api) -> None:
    thread = await api.thread()
    response = await upload(api, thread, ("big.bin", b"x" * (FILE_LIMIT + 1)))
    error_of(response, 413, "payload_too_large")
    assert "big.bin" in response.json()["error"]["message"]
    await uploaded(api, thread, ("one.bin", b"1" * 60_000))
    await uploaded(api, thread, ("two.bin", b"2" * 60_000))
    response = await upload(api, thread, ("three.bin", b"3" * 60_000))  # 180,000 > 163,840
    error_of(response, 413, "payload_too_large")
    names = sorted(os.listdir(workdir(api, thread) / "uploads"))
    assert names == ["one.bin", "two.bin"]
    # one request with a good file and a too large one stores neither
    response = await upload(api, thread, ("ok.txt", b"fine"), ("huge.bin", b"h" * (FILE_LIMIT + 5)))
    error_of(response, 413, "payload_too_large")
    assert sorted(os.listdir(workdir(api, thread) / "uploads")) == ["one.bin", "two.bin"]


async def test_concurrent_uploads_never_pass_the_thread_limit(api: Api) -> None:
    thread = await api.thread()
    clients = [api.client(api.tokens["alice"]) for _ in range(8)]
    try:
        responses = await asyncio.gather(
            *(
                c.post(
                    f"/api/chat/thread/{thread}/attachments",
                    files=[
                        ("file", (f"f{i}.bin", bytes([i]) * 60_000, "application/octet-stream"))
                    ],
                )
                for i, c in enumerate(clients)
            )
        )
    finally:
        for c in clients:
            await c.aclose()
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201, 201] + [413] * 6, [r.text for r in responses]
    total = await api.value("SELECT sum(bytes) FROM yuxi.attachments WHERE thread_id = %s", thread)
    assert total == 120_000
    on_disk = sorted(os.listdir(workdir(api, thread) / "uploads"))
    rows = await api.sql(
        "SELECT filename FROM yuxi.attachments WHERE thread_id = %s ORDER BY filename", thread
    )
    assert on_disk == [r[0] for r in rows]


@pytest.mark.parametrize(
    "raw",
    [
        "../x",
        "uploads/../../x",
        "/etc/passwd",
        "%2e%2e/x",
        "uploads\\..\\x",
        "a\x00b",
        "n" * 300,
        "a/" * 600,
    ],
)
async def test_paths_that_leave_the_workdir_are_refused(api: Api, raw: str) -> None:
    thread = await api.thread()
    await uploaded(api, thread, ("a.txt", b"A"))
    if raw == "%2e%2e/x":  # sent encoded as given: the server decodes it to ../x
        query: Any = "path=%2e%2e%2Fx"
    else:
        query = httpx.QueryParams({"path": raw})
    for route in ("files", "files/content"):
        response = await api.alice.get(f"/api/chat/thread/{thread}/{route}", params=query)
        error_of(response, 400, "invalid_input")
        assert str(api.home) not in response.text


async def test_symlinks_leading_out_are_listed_but_never_followed(api: Api, tmp_path: Path) -> None:
    thread = await api.thread()
    await uploaded(api, thread, ("a.txt", b"A"))
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    root = workdir(api, thread)
    (root / "leak.txt").symlink_to(secret)
    (root / "leakdir").symlink_to(tmp_path)
    (root / "inner.txt").symlink_to(root / "uploads" / "a.txt")  # inside: followed
    listing = (await api.alice.get(f"/api/chat/thread/{thread}/files")).json()
    kinds = {e["name"]: e["kind"] for e in listing["entries"]}
    assert kinds == {
        "uploads": "directory",
        "inner.txt": "file",
        "leak.txt": "symlink",
        "leakdir": "symlink",
    }
    for path in ("leak.txt", "leakdir", "leakdir/secret.txt"):
        for route in ("files", "files/content"):
            response = await api.alice.get(
                f"/api/chat/thread/{thread}/{route}", params={"path": path}
            )
            error_of(response, 400, "invalid_input")
            assert "host secret" not in response.text and str(tmp_path) not in response.text
    inner = await api.alice.get(
        f"/api/chat/thread/{thread}/files/content", params={"path": "inner.txt"}
    )
    assert inner.content == b"A"
    # an uploads/ that is a link out: uploads are refused, nothing is written there
    (root / "uploads").rename(root / "moved")
    (root / "uploads").symlink_to(tmp_path)
    response = await upload(api, thread, ("b.txt", b"B"))
    error_of(response, 400, "invalid_input")
    assert sorted(os.listdir(tmp_path)) == ["secret.txt"]


async def test_missing_and_wrong_kinds(api: Api) -> None:
    thread = await api.thread()
    empty = (await api.alice.get(f"/api/chat/thread/{thread}/files")).json()
    assert empty == {"path": ".", "entries": [], "truncated": False}
    assert (await api.alice.get(f"/api/chat/thread/{thread}/artifacts")).json() == {
        "artifacts": [],
        "truncated": False,
    }
    await uploaded(api, thread, ("a.txt", b"A"))
    base = f"/api/chat/thread/{thread}"
    error_of(await api.alice.get(f"{base}/files", params={"path": "nope"}), 404, "not_found")
    error_of(await api.alice.get(f"{base}/files/content", params={"path": "nope"}), 404)
    error_of(await api.alice.get(f"{base}/files", params={"path": "uploads/a.txt"}), 400)
    error_of(await api.alice.get(f"{base}/files/content", params={"path": "uploads"}), 400)
    error_of(await api.alice.post(f"{base}/attachments", json={"file": "x"}), 400, "invalid_input")
    error_of(
        await api.alice.post(
            f"{base}/attachments", files=[("other", ("a.txt", b"A", "text/plain"))]
        ),
        400,
        "invalid_input",
    )


async def test_other_users_see_nothing(api: Api) -> None:
    thread = await api.thread()
    [attachment] = await uploaded(api, thread, ("a.txt", b"A"))
    base = f"/api/chat/thread/{thread}"
    for response in (
        await upload(api, thread, ("b.txt", b"B"), who="bob"),
        await api.bob.get(f"{base}/attachments"),
        await api.bob.delete(f"{base}/attachments/{attachment['id']}"),
        await api.bob.get(f"{base}/files"),
        await api.bob.get(f"{base}/files/content", params={"path": "uploads/a.txt"}),
        await api.bob.get(f"{base}/artifacts"),
        await api.bob.get(f"{base}/state"),
        await api.bob.patch(base, json={"title": "mine"}),
    ):
        error_of(response, 404, "not_found")
    assert sorted(os.listdir(workdir(api, thread) / "uploads")) == ["a.txt"]
    error_of(await upload(api, thread, ("b.txt", b"B"), who="anon"), 401)


async def test_delete_removes_the_row_and_the_file(api: Api) -> None:
    thread = await api.thread()
    [attachment] = await uploaded(api, thread, ("a.txt", b"A"))
    url = f"/api/chat/thread/{thread}/attachments/{attachment['id']}"
    assert (await api.alice.delete(url)).status_code == 204
    assert not (workdir(api, thread) / "uploads" / "a.txt").exists()
    assert (await api.alice.get(f"/api/chat/thread/{thread}/attachments")).json() == []
    error_of(await api.alice.delete(url), 404, "not_found")


async def test_rename_and_the_workdir_of_a_thread(api: Api) -> None:
    thread = await api.thread()
    response = await api.alice.patch(f"/api/chat/thread/{thread}", json={"title": "新名字"})
    assert response.status_code == 200, response.text
    view = response.json()
    assert view["title"] == "新名字" and view["workdir"] == f"threads/{thread}"
    error_of(await api.alice.patch(f"/api/chat/thread/{thread}", json={"title": "x" * 201}), 400)
    error_of(await api.alice.patch(f"/api/chat/thread/{thread}", json={"agent_id": "x"}), 400)
    history = await api.history(thread)
    assert history["thread"]["workdir"] == f"threads/{thread}"
    assert history["thread"]["title"] == "新名字"
    project = await api.alice.post("/api/projects", json={"name": "p", "workdir_path": "site"})
    assert project.status_code == 201, project.text
    in_project = await api.thread(project_id=project.json()["id"])
    listed = {t["id"]: t for t in (await api.alice.get("/api/chat/threads")).json()}
    assert listed[in_project]["workdir"] == "projects/site"
    await uploaded(api, in_project, ("p.txt", b"P"))
    project_dir = api.home / "workspaces" / str(api.uids["alice"]) / "projects" / "site"
    assert (project_dir / "uploads" / "p.txt").read_bytes() == b"P"


async def test_a_run_body_may_carry_an_image_or_name_attachments(api: Api) -> None:
    thread = await api.thread()
    encoded = base64.b64encode(PNG).decode()
    request = await api.submit(thread, "look", image_content=f"data:image/png;base64,{encoded}")
    assert request["status"] in ("dispatched", "queued")
    [image] = (await api.alice.get(f"/api/chat/thread/{thread}/attachments")).json()
    assert image["filename"] == f"image-{hashlib.sha256(PNG).hexdigest()[:12]}.png"
    assert image["media_type"] == "image/png" and image["bytes"] == len(PNG)
    assert (workdir(api, thread) / image["path"]).read_bytes() == PNG

    other = await api.thread()
    [doc] = await uploaded(api, other, ("doc.txt", b"D"))
    stranger = await uploaded(api, thread, ("x.txt", b"X"))
    ok = await api.alice.post(
        "/api/agent/runs",
        json={"thread_id": other, "query": "read it", "attachments": [doc["id"]]},
    )
    assert ok.status_code == 202, ok.text
    requests_before = await api.value("SELECT count(*) FROM yuxi.agent_run_requests")
    for body in (
        {"attachments": [stranger[0]["id"]]},  # another thread's
        {"image_content": "not base64!"},
        {"image_content": base64.b64encode(b"plain text").decode()},
        {"image_content": "data:image/png,raw"},
    ):
        response = await api.alice.post(
            "/api/agent/runs", json={"thread_id": other, "query": "x", **body}
        )
        error_of(response, 400, "invalid_input")
    assert await api.value("SELECT count(*) FROM yuxi.agent_run_requests") == requests_before
    assert sorted(os.listdir(workdir(api, other) / "uploads")) == ["doc.txt"]
