"""Attachments, the workdir viewer, downloads and artifacts over real HTTP: every file
lives in the file store (the thread's workdir tree) and the API never touches its
host's disk for one. No worker runs in this module, so nothing else writes under
``$YUXI_HOME`` either: its ``workspaces/`` must never appear. What an agent writes is
put in the store here as a worker would (``yuxi.file_write``); runs reading and
writing files are in test_subagent_files.py."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import shutil
from typing import Any
from uuid import UUID

import httpx
import pytest

from tests.api.conftest import Api, error_of

pytestmark = pytest.mark.asyncio(loop_scope="module")

MiB = 1024 * 1024
# past one 1 MiB chunk of the store, so a file is partly committed while it streams in
FILE_LIMIT = MiB + MiB // 2
THREAD_LIMIT = 4 * MiB
API_SETTINGS = {"attachment_max_bytes": FILE_LIMIT, "thread_attachments_max_bytes": THREAD_LIMIT}
PART = 1_400_000  # two fit in a thread, three do not
# a 1x1 PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


async def upload(
    api: Api, thread_id: str, *files: tuple[str, bytes], who: str = "alice"
) -> httpx.Response:
    parts = [("file", (name, data, "application/octet-stream")) for name, data in files]
    return await api.clients[who].post(f"/api/chat/thread/{thread_id}/attachments", files=parts)


async def uploaded(api: Api, thread_id: str, *files: tuple[str, bytes]) -> list[dict[str, Any]]:
    response = await upload(api, thread_id, *files)
    assert response.status_code == 201, response.text
    return list(response.json())


# -- the store, as the tests see it ------------------------------------------------------


async def tree_of(api: Api, thread_id: str, who: str = "alice") -> UUID:
    """The thread's workdir tree (made when missing, as the API's first use does)."""
    return UUID(
        str(await api.value("SELECT yuxi.thread_file_tree(%s, %s)", api.uids[who], UUID(thread_id)))
    )


async def stored(api: Api, thread_id: str, prefix: str = "") -> dict[str, bytes]:
    """The files of the thread's workdir tree (under ``prefix``) and their bytes."""
    tree = await tree_of(api, thread_id)
    found: dict[str, bytes] = {}
    for path, content, chunks in await api.sql(
        "SELECT path, content_id, chunks FROM yuxi.file_list(%s, %s)", tree, prefix
    ):
        pieces = await api.sql(
            "SELECT data FROM yuxi.file_chunks_read(%s, 0, %s)", content, chunks - 1
        )
        found[path] = b"".join(bytes(piece) for (piece,) in pieces)
    return found


async def write_as_agent(api: Api, thread_id: str, path: str, data: bytes) -> None:
    """What a worker's write-through does when an agent writes ``path``."""
    await api.sql(
        "SELECT yuxi.file_write(%s, %s, %s, 'application/octet-stream')",
        await tree_of(api, thread_id),
        path,
        data,
    )


async def attachment_names(api: Api, thread_id: str) -> list[str]:
    rows = await api.sql(
        "SELECT filename FROM yuxi.attachments WHERE thread_id = %s ORDER BY filename", thread_id
    )
    return [name for (name,) in rows]


async def unfinished(api: Api) -> int:
    """Contents a writer opened and never linked (a failed upload not cleaned up)."""
    return int(await api.value("SELECT count(*) FROM yuxi.file_contents WHERE sha256 IS NULL"))


async def nothing_unfinished(api: Api, within: float = 10.0) -> None:
    """Waits for the server to give up what a failed request sent (it answers, or sees
    the client gone, before it has aborted every upload)."""
    async with asyncio.timeout(within):
        while True:
            if not await unfinished(api):
                return
            await asyncio.sleep(0.02)


def no_disk(api: Api) -> None:
    """The API wrote no file on its host: no workspace, workdir or staging file."""
    assert not (api.home / "workspaces").exists(), sorted(api.home.rglob("*"))


# -- attachments ---------------------------------------------------------------------------


async def test_an_attachment_lands_in_the_store_and_is_viewed_from_it(api: Api) -> None:
    thread = await api.thread()
    text = "第一行 first line\n".encode()
    [attachment] = await uploaded(api, thread, ("notes.txt", text))
    assert attachment["path"] == "uploads/notes.txt" and attachment["filename"] == "notes.txt"
    assert attachment["bytes"] == len(text)
    assert attachment["sha256"] == hashlib.sha256(text).hexdigest()
    assert attachment["media_type"] == "text/plain" and attachment["created"] is True
    assert await stored(api, thread) == {"uploads/notes.txt": text}
    media = await api.value(
        "SELECT media_type FROM yuxi.file_get(%s, 'uploads/notes.txt')", await tree_of(api, thread)
    )
    assert media == "text/plain"

    listed = (await api.alice.get(f"/api/chat/thread/{thread}/attachments")).json()
    assert [a["id"] for a in listed] == [attachment["id"]]

    await write_as_agent(api, thread, "outputs/report.md", b"# Report\nok")
    root = (await api.alice.get(f"/api/chat/thread/{thread}/files")).json()
    assert root["path"] == "." and root["truncated"] is False
    assert [(e["name"], e["kind"]) for e in root["entries"]] == [
        ("outputs", "directory"),
        ("uploads", "directory"),
    ]
    assert all(e["modified"] is not None for e in root["entries"])
    outputs = (
        await api.alice.get(f"/api/chat/thread/{thread}/files", params={"path": "outputs"})
    ).json()
    assert outputs["path"] == "outputs"
    [report] = outputs["entries"]
    assert report["path"] == "outputs/report.md" and report["kind"] == "file"
    assert report["bytes"] == 11 and report["media_type"] == "text/markdown"
    again = await api.alice.get(f"/api/chat/thread/{thread}/files", params={"path": "./outputs/"})
    assert again.json() == outputs

    content = await api.alice.get(
        f"/api/chat/thread/{thread}/files/content", params={"path": "outputs/report.md"}
    )
    assert content.status_code == 200 and content.content == b"# Report\nok"
    assert content.headers["content-type"] == "text/markdown; charset=utf-8"
    assert content.headers["content-length"] == "11"
    assert content.headers["etag"] == '"' + hashlib.sha256(b"# Report\nok").hexdigest() + '"'
    assert content.headers["accept-ranges"] == "bytes"
    assert content.headers["content-disposition"].startswith('inline; filename="report.md"')
    assert content.headers["x-content-type-options"] == "nosniff"
    assert content.headers["content-security-policy"].startswith("sandbox")
    download = await api.alice.get(
        f"/api/chat/thread/{thread}/files/content",
        params={"path": "uploads/notes.txt", "download": "true"},
    )
    assert download.status_code == 200 and download.content == text
    assert download.headers["content-disposition"].startswith("attachment;")

    artifacts = (await api.alice.get(f"/api/chat/thread/{thread}/artifacts")).json()
    assert [a["path"] for a in artifacts["artifacts"]] == ["outputs/report.md"]
    assert artifacts["artifacts"][0]["bytes"] == 11 and artifacts["truncated"] is False
    # no host path anywhere in what the client was sent
    for body in (root, outputs, artifacts, listed, attachment):
        assert str(api.home) not in str(body)
    # and nothing of it on the API's host
    no_disk(api)


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
    # a file the agent wrote in uploads/ is never overwritten, nor a directory it made
    await write_as_agent(api, thread, "uploads/mine.txt", b"agent's")
    await write_as_agent(api, thread, "uploads/dir.txt/inner", b"inside")
    mine = await uploaded(api, thread, ("mine.txt", b"user's"), ("dir.txt", b"d"))
    assert [a["filename"] for a in mine] == ["mine (2).txt", "dir (2).txt"]
    files = await stored(api, thread)
    assert files["uploads/mine.txt"] == b"agent's" and files["uploads/mine (2).txt"] == b"user's"
    assert files["uploads/dir.txt/inner"] == b"inside"
    # every attachment is its file, nothing was written anywhere but uploads/
    names = await attachment_names(api, thread)
    assert sorted(f"uploads/{n}" for n in names) == sorted(
        path for path in files if path not in ("uploads/mine.txt", "uploads/dir.txt/inner")
    )
    assert files["uploads/evil.txt"] == b"one" and files["uploads/evil (2).txt"] == b"two"
    assert all(path.startswith("uploads/") for path in files)
    assert await unfinished(api) == 0  # no upload left half-way
    no_disk(api)


async def test_limits_give_413_and_keep_nothing(api: Api) -> None:
    thread = await api.thread()
    response = await upload(api, thread, ("big.bin", b"x" * (FILE_LIMIT + 1)))
    error_of(response, 413, "payload_too_large")
    assert "big.bin" in response.json()["error"]["message"]
    await uploaded(api, thread, ("one.bin", b"1" * PART))
    await uploaded(api, thread, ("two.bin", b"2" * PART))
    response = await upload(api, thread, ("three.bin", b"3" * PART))  # 3 * PART > 4 MiB
    error_of(response, 413, "payload_too_large")
    assert sorted(await stored(api, thread)) == ["uploads/one.bin", "uploads/two.bin"]
    assert await attachment_names(api, thread) == ["one.bin", "two.bin"]
    await nothing_unfinished(api)


async def test_a_request_whose_second_file_is_too_large_leaves_nothing(api: Api) -> None:
    thread = await api.thread()
    # the first file streams a whole chunk into the store before the second is refused
    first = os.urandom(MiB + 1000)
    response = await upload(api, thread, ("ok.bin", first), ("huge.bin", b"h" * (FILE_LIMIT + 5)))
    error_of(response, 413, "payload_too_large")
    assert "huge.bin" in response.json()["error"]["message"]
    assert await attachment_names(api, thread) == []
    assert await stored(api, thread) == {}
    await nothing_unfinished(api)
    digest = hashlib.sha256(first).hexdigest()
    assert await api.value("SELECT count(*) FROM yuxi.file_contents WHERE sha256 = %s", digest) == 0
    no_disk(api)


async def test_a_client_that_drops_mid_upload_leaves_nothing(api: Api) -> None:
    thread = await api.thread()
    boundary = "yuxi-drop-test"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="cut.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    declared = len(head) + FILE_LIMIT + len(f"\r\n--{boundary}--\r\n")
    address = httpx.URL(api.base_url)
    _reader, writer = await asyncio.open_connection(address.host, address.port)
    try:
        writer.write(
            (
                f"POST /api/chat/thread/{thread}/attachments HTTP/1.1\r\n"
                f"Host: {address.host}\r\nAuthorization: Bearer {api.tokens['alice']}\r\n"
                f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
                f"Content-Length: {declared}\r\n\r\n"
            ).encode()
            + head
            + os.urandom(MiB + 4096)  # a chunk's worth and some: one chunk is committed
        )
        await writer.drain()
        # the upload is under way: its first chunk is in the store, unlinked
        async with asyncio.timeout(10):
            while True:
                if await unfinished(api):
                    break
                await asyncio.sleep(0.02)
    finally:
        writer.transport.abort()  # gone, a third of the file unsent
    await nothing_unfinished(api)
    assert await attachment_names(api, thread) == []
    assert await stored(api, thread) == {}
    assert await api.value("SELECT count(*) FROM yuxi.file_chunks c"
                           " JOIN yuxi.file_contents f ON f.id = c.content_id"
                           " WHERE f.sha256 IS NULL") == 0  # fmt: skip
    # the thread still takes uploads
    await uploaded(api, thread, ("after.txt", b"fine"))
    assert await stored(api, thread) == {"uploads/after.txt": b"fine"}


async def test_ten_concurrent_uploads_never_pass_the_thread_limit(api: Api) -> None:
    thread = await api.thread()
    clients = [api.client(api.tokens["alice"]) for _ in range(10)]
    try:
        responses = await asyncio.gather(
            *(
                c.post(
                    f"/api/chat/thread/{thread}/attachments",
                    files=[("file", (f"f{i}.bin", bytes([i]) * PART, "application/octet-stream"))],
                )
                for i, c in enumerate(clients)
            )
        )
    finally:
        for c in clients:
            await c.aclose()
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201, 201] + [413] * 8, [r.text for r in responses]
    total = await api.value("SELECT sum(bytes) FROM yuxi.attachments WHERE thread_id = %s", thread)
    assert total == 2 * PART
    files = await stored(api, thread)
    assert sorted(files) == [f"uploads/{name}" for name in await attachment_names(api, thread)]
    assert await api.value(
        "SELECT bytes FROM yuxi.file_trees WHERE id = %s", await tree_of(api, thread)
    ) == 2 * PART  # fmt: skip
    await nothing_unfinished(api)


async def test_more_concurrent_uploads_than_the_pool_has_connections_all_land(api: Api) -> None:
    """Each commit needs a second connection for its file's last piece while it holds
    the conversation's lock: uploads waiting for that lock must not hold them all."""
    thread = await api.thread()
    count = 2 * api.settings.pool_max_size
    clients = [api.client(api.tokens["alice"]) for _ in range(count)]
    try:
        responses = await asyncio.gather(
            *(
                c.post(
                    f"/api/chat/thread/{thread}/attachments",
                    files=[("file", (f"s{i}.bin", os.urandom(50_000), "application/octet-stream"))],
                )
                for i, c in enumerate(clients)
            )
        )
    finally:
        for c in clients:
            await c.aclose()
    assert [r.status_code for r in responses] == [201] * count, [r.text for r in responses]
    assert len(await stored(api, thread)) == count
    assert len(await attachment_names(api, thread)) == count


# -- the viewer ----------------------------------------------------------------------------


async def test_byte_ranges_across_chunk_boundaries(api: Api) -> None:
    thread = await api.thread()
    data = os.urandom(5 * MiB + 12345)  # six chunks: more than one read of the store
    await write_as_agent(api, thread, "outputs/big.bin", data)
    url = f"/api/chat/thread/{thread}/files/content"
    size = len(data)
    etag = f'"{hashlib.sha256(data).hexdigest()}"'

    whole = await api.alice.get(url, params={"path": "outputs/big.bin"})
    assert whole.status_code == 200 and whole.content == data
    assert whole.headers["content-length"] == str(size) and "content-range" not in whole.headers
    assert whole.headers["etag"] == etag and whole.headers["accept-ranges"] == "bytes"
    assert whole.headers["content-type"] == "application/octet-stream"

    async def ranged(spec: str, **headers: str) -> httpx.Response:
        return await api.alice.get(
            url, params={"path": "outputs/big.bin"}, headers={"Range": spec, **headers}
        )

    for spec, start, end in [
        (f"bytes={MiB - 10}-{MiB + 9}", MiB - 10, MiB + 10),  # across the first boundary
        (f"bytes={MiB}-{2 * MiB - 1}", MiB, 2 * MiB),  # exactly the second chunk
        (f"bytes={MiB - 1}-{5 * MiB}", MiB - 1, 5 * MiB + 1),  # five chunks, two reads
        ("bytes=0-0", 0, 1),
        (f"bytes={3 * MiB + 7}-", 3 * MiB + 7, size),
        ("bytes=-100", size - 100, size),  # a suffix
        (f"bytes=-{size + 50}", 0, size),  # a suffix longer than the file: all of it
        (f"bytes=100-{size * 2}", 100, size),  # an end past the file's
        (f"bytes={size - 1}-{size - 1}", size - 1, size),
    ]:
        response = await ranged(spec)
        assert response.status_code == 206, (spec, response.text[:200])
        assert response.content == data[start:end], spec
        assert response.headers["content-range"] == f"bytes {start}-{end - 1}/{size}", spec
        assert response.headers["content-length"] == str(end - start), spec
        assert response.headers["etag"] == etag

    for spec in (f"bytes={size}-", f"bytes={size + 10}-{size + 20}", "bytes=-0"):
        response = await ranged(spec)
        error_of(response, 416, "range_not_satisfiable")
        assert response.headers["content-range"] == f"bytes */{size}"

    # what is not served as a range is ignored: the whole file, 200
    for spec in ("bytes=5-2", "bytes=0-1,5-6", "items=0-1", "bytes=x-y", "bytes=-"):
        response = await ranged(spec)
        assert response.status_code == 200 and response.content == data, spec
    # If-Range: the range only for the bytes the client has
    assert (await ranged("bytes=0-9", **{"If-Range": etag})).status_code == 206
    stale = await ranged("bytes=0-9", **{"If-Range": '"0000"'})
    assert stale.status_code == 200 and stale.content == data
    # If-None-Match: the client's copy is current
    current = await api.alice.get(
        url, params={"path": "outputs/big.bin"}, headers={"If-None-Match": etag}
    )
    assert current.status_code == 304 and current.content == b""
    assert current.headers["etag"] == etag

    # an empty file: 200 with nothing, and no byte to range over
    await write_as_agent(api, thread, "outputs/empty.txt", b"")
    empty = await api.alice.get(url, params={"path": "outputs/empty.txt"})
    assert empty.status_code == 200 and empty.content == b""
    assert empty.headers["content-length"] == "0"
    response = await api.alice.get(
        url, params={"path": "outputs/empty.txt"}, headers={"Range": "bytes=0-"}
    )
    error_of(response, 416, "range_not_satisfiable")
    assert response.headers["content-range"] == "bytes */0"


async def test_listings_are_capped(api: Api) -> None:
    thread = await api.thread()
    await api.sql(
        "SELECT yuxi.file_write(%s, 'outputs/f' || lpad(i::text, 4, '0'), 'x'::bytea)"
        " FROM generate_series(1, 1001) i",
        await tree_of(api, thread),
    )
    outputs = (
        await api.alice.get(f"/api/chat/thread/{thread}/files", params={"path": "outputs"})
    ).json()
    assert len(outputs["entries"]) == 1000 and outputs["truncated"] is True
    assert outputs["entries"][0]["path"] == "outputs/f0001"
    assert outputs["entries"][-1]["path"] == "outputs/f1000"
    artifacts = (await api.alice.get(f"/api/chat/thread/{thread}/artifacts")).json()
    assert len(artifacts["artifacts"]) == 1000 and artifacts["truncated"] is True
    root = (await api.alice.get(f"/api/chat/thread/{thread}/files")).json()
    assert [(e["name"], e["kind"]) for e in root["entries"]] == [("outputs", "directory")]
    assert root["truncated"] is False


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


async def test_the_viewer_reads_the_store_never_the_disk(api: Api) -> None:
    thread = await api.thread()
    await uploaded(api, thread, ("a.txt", b"A"))
    # a file where the workdir used to be on the API's host is nothing the API shows
    legacy = api.home / "workspaces" / str(api.uids["alice"]) / "threads" / thread
    (legacy / "uploads").mkdir(parents=True)
    (legacy / "uploads" / "ghost.txt").write_text("on disk only")
    (legacy / "uploads" / "a.txt").write_text("not the stored bytes")
    try:
        base = f"/api/chat/thread/{thread}"
        listing = (await api.alice.get(f"{base}/files", params={"path": "uploads"})).json()
        assert [e["name"] for e in listing["entries"]] == ["a.txt"]
        content = await api.alice.get(f"{base}/files/content", params={"path": "uploads/a.txt"})
        assert content.content == b"A"
        ghost = await api.alice.get(f"{base}/files/content", params={"path": "uploads/ghost.txt"})
        error_of(ghost, 404, "not_found")
    finally:
        shutil.rmtree(api.home / "workspaces")


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
    error_of(await api.alice.get(f"{base}/files", params={"path": "upload"}), 404, "not_found")
    error_of(await api.alice.get(f"{base}/files/content", params={"path": "nope"}), 404)
    error_of(await api.alice.get(f"{base}/files", params={"path": "uploads/a.txt"}), 400)
    error_of(await api.alice.get(f"{base}/files/content", params={"path": "uploads"}), 400)
    error_of(await api.alice.get(f"{base}/files/content", params={"path": "."}), 400)
    error_of(await api.alice.post(f"{base}/attachments", json={"file": "x"}), 400, "invalid_input")
    error_of(
        await api.alice.post(
            f"{base}/attachments", files=[("other", ("a.txt", b"A", "text/plain"))]
        ),
        400,
        "invalid_input",
    )
    assert await stored(api, thread) == {"uploads/a.txt": b"A"}


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
        await api.bob.get(
            f"{base}/files/content", params={"path": "uploads/a.txt"}, headers={"Range": "bytes=0-"}
        ),
        await api.bob.get(f"{base}/artifacts"),
        await api.bob.get(f"{base}/state"),
        await api.bob.patch(base, json={"title": "mine"}),
    ):
        error_of(response, 404, "not_found")
    assert await stored(api, thread) == {"uploads/a.txt": b"A"}
    assert await attachment_names(api, thread) == ["a.txt"]
    # bob's upload went into no tree of his either
    bobs = await api.value(
        "SELECT count(*) FROM yuxi.files f JOIN yuxi.file_trees t ON t.id = f.tree_id"
        " WHERE t.owner_uid = %s",
        api.uids["bob"],
    )
    assert bobs == 0
    error_of(await upload(api, thread, ("b.txt", b"B"), who="anon"), 401)


async def test_delete_removes_the_row_and_the_file(api: Api) -> None:
    thread = await api.thread()
    data = os.urandom(64)  # bytes no other file of alice's has
    [attachment] = await uploaded(api, thread, ("a.txt", data))
    await write_as_agent(api, thread, "uploads/kept.txt", b"the agent's")
    url = f"/api/chat/thread/{thread}/attachments/{attachment['id']}"
    assert (await api.alice.delete(url)).status_code == 204
    assert await stored(api, thread) == {"uploads/kept.txt": b"the agent's"}
    assert (await api.alice.get(f"/api/chat/thread/{thread}/attachments")).json() == []
    error_of(await api.alice.delete(url), 404, "not_found")
    # its content is no file's now: the collector removes it
    digest = hashlib.sha256(data).hexdigest()
    await api.sql("SELECT yuxi.file_gc()")
    assert await api.value("SELECT count(*) FROM yuxi.file_contents WHERE sha256 = %s", digest) == 0


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
    # the project's workdir tree, shared by its threads
    root = await api.value(
        "SELECT root FROM yuxi.file_trees WHERE id = %s", await tree_of(api, in_project)
    )
    assert root == "projects/site"
    other = await api.thread(project_id=project.json()["id"])
    assert await stored(api, other) == {"uploads/p.txt": b"P"}
    no_disk(api)


async def test_a_run_body_may_carry_an_image_or_name_attachments(api: Api) -> None:
    thread = await api.thread()
    encoded = base64.b64encode(PNG).decode()
    request = await api.submit(thread, "look", image_content=f"data:image/png;base64,{encoded}")
    assert request["status"] in ("dispatched", "queued")
    [image] = (await api.alice.get(f"/api/chat/thread/{thread}/attachments")).json()
    assert image["filename"] == f"image-{hashlib.sha256(PNG).hexdigest()[:12]}.png"
    assert image["media_type"] == "image/png" and image["bytes"] == len(PNG)
    assert await stored(api, thread) == {image["path"]: PNG}

    other = await api.thread()
    [doc] = await uploaded(api, other, ("doc.txt", b"D"))
    stranger = await uploaded(api, thread, ("x.txt", b"X"))
    ok = await api.alice.post(
        "/api/agent/runs",
        json={"thread_id": other, "query": "read it", "attachments": [doc["id"]]},
    )
    assert ok.status_code == 202, ok.text
    requests_before = await api.value("SELECT count(*) FROM yuxi.agent_run_requests")
    gif = base64.b64encode(b"GIF89a" + os.urandom(32)).decode()
    for body in (
        {"attachments": [stranger[0]["id"]]},  # another thread's
        {"image_content": gif, "attachments": [stranger[0]["id"]]},  # the image goes too
        {"image_content": "not base64!"},
        {"image_content": base64.b64encode(b"plain text").decode()},
        {"image_content": "data:image/png,raw"},
    ):
        response = await api.alice.post(
            "/api/agent/runs", json={"thread_id": other, "query": "x", **body}
        )
        error_of(response, 400, "invalid_input")
    assert await api.value("SELECT count(*) FROM yuxi.agent_run_requests") == requests_before
    assert await stored(api, other) == {"uploads/doc.txt": b"D"}
    assert await attachment_names(api, other) == ["doc.txt"]
    await nothing_unfinished(api)
    no_disk(api)


async def test_the_api_wrote_nothing_on_its_host(api: Api) -> None:
    """After every upload, listing, download and range read of this module, and the
    workspace files (written and read here too), no workspace exists on the disk."""
    put = await api.alice.put("/api/workspace/files/agents/USER.md", content=b"# me\n")
    assert put.status_code == 200, put.text
    got = await api.alice.get("/api/workspace/files/agents/USER.md")
    assert got.status_code == 200 and got.content == b"# me\n"
    assert (await api.alice.get("/api/workspace/files/agents/AGENTS.md")).status_code == 200
    no_disk(api)
    # the key sealing model secrets is the only thing the API keeps there
    assert sorted(p.name for p in api.home.iterdir()) == ["secret.key"]
