"""GET/PUT /api/workspace/files/{name}: the caller's agents/AGENTS.md, USER.md and
MEMORY.md as raw text, over real HTTP, and nothing else of the host. They are the
caller's workspace tree in the file store: the API writes no workspace on its disk."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from datetime import datetime
from uuid import UUID

import httpx
import pytest

from tests.api.conftest import Api, error_of
from yuxi.files.workspace import AGENTS_TEMPLATE, PROMPT_LIMIT, WORKSPACE_FILES
from yuxi.queue.users import user_create

pytestmark = pytest.mark.asyncio(loop_scope="module")

FILES = "/api/workspace/files"
MARKDOWN = "text/markdown; charset=utf-8"


async def new_user(api: Api, name: str) -> tuple[str, httpx.AsyncClient]:
    async with api.pool.connection() as conn:
        uid, token = await user_create(conn, name)
    return str(uid), api.client(token)


async def workspace_files(api: Api, uid: str) -> dict[str, bytes]:
    """The files of the user's workspace tree and their bytes."""
    tree = await api.value("SELECT yuxi.workspace_file_tree(%s)", UUID(uid))
    found: dict[str, bytes] = {}
    for path, content, chunks in await api.sql(
        "SELECT path, content_id, chunks FROM yuxi.file_list(%s)", tree
    ):
        pieces = await api.sql(
            "SELECT data FROM yuxi.file_chunks_read(%s, 0, %s)", content, chunks - 1
        )
        found[path] = b"".join(bytes(piece) for (piece,) in pieces)
    return found


async def write_directly(api: Api, uid: str, path: str, data: bytes) -> None:
    """A file of the workspace tree as another writer (a worker, psql) leaves it."""
    await api.sql(
        "SELECT yuxi.file_write(yuxi.workspace_file_tree(%s), %s, %s)", UUID(uid), path, data
    )


def no_disk(api: Api, uid: str) -> None:
    assert not (api.home / "workspaces" / uid).exists()


def no_host_path(api: Api, response: httpx.Response) -> None:
    assert str(api.home) not in response.text
    assert str(api.home.resolve()) not in response.text


async def test_a_new_workspace_gets_the_agents_template_on_first_read(api: Api) -> None:
    uid, client = await new_user(api, "wendy")
    async with client:
        assert await workspace_files(api, uid) == {}
        response = await client.get(f"{FILES}/agents/AGENTS.md")
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == MARKDOWN
        assert response.text == AGENTS_TEMPLATE
        assert await workspace_files(api, uid) == {"agents/AGENTS.md": AGENTS_TEMPLATE.encode()}
        # the template is comments only
        assert AGENTS_TEMPLATE.strip().startswith("<!--")
        assert AGENTS_TEMPLATE.strip().endswith("-->")
        for name in ("agents/USER.md", "agents/MEMORY.md"):
            error_of(await client.get(f"{FILES}/{name}"), 404, "not_found")
        # a user who empties it keeps it empty: the template is for a new workspace only
        assert (await client.put(f"{FILES}/agents/AGENTS.md", content=b"")).status_code == 200
        assert (await client.get(f"{FILES}/agents/AGENTS.md")).content == b""
        assert await workspace_files(api, uid) == {"agents/AGENTS.md": b""}
    no_disk(api, uid)


async def test_a_first_read_racing_a_first_write_never_replaces_the_users_text(
    api: Api,
) -> None:
    for n in range(5):
        uid, client = await new_user(api, f"racer{n}")
        async with client:
            put, got = await asyncio.gather(
                client.put(f"{FILES}/agents/AGENTS.md", content=b"mine\n"),
                client.get(f"{FILES}/agents/AGENTS.md"),
            )
            assert put.status_code == 200, put.text
            assert got.status_code == 200 and got.content in (b"mine\n", AGENTS_TEMPLATE.encode())
            assert (await client.get(f"{FILES}/agents/AGENTS.md")).content == b"mine\n"
        assert await workspace_files(api, uid) == {"agents/AGENTS.md": b"mine\n"}


@pytest.mark.parametrize("name", WORKSPACE_FILES)
async def test_each_file_is_written_atomically_and_read_back(api: Api, name: str) -> None:
    uid = str(api.uids["alice"])
    body = f"# {name}\n\nSé brief — 简短.\n".encode()
    response = await api.alice.put(
        f"{FILES}/{name}", content=body, headers={"content-type": "text/markdown"}
    )
    assert response.status_code == 200, response.text
    saved = response.json()
    assert set(saved) == {"name", "bytes", "sha256", "updated_at"}
    assert saved["name"] == name
    assert saved["bytes"] == len(body)
    assert saved["sha256"] == hashlib.sha256(body).hexdigest()
    updated = datetime.fromisoformat(saved["updated_at"].replace("Z", "+00:00"))
    files = await workspace_files(api, uid)
    assert files[name] == body
    # nothing else is left next to it: the workspace holds its files and nothing more
    assert set(files) <= set(WORKSPACE_FILES)
    modified, writer = (
        await api.sql(
            "SELECT modified_at, written_by_uid"
            " FROM yuxi.file_get(yuxi.workspace_file_tree(%s), %s)",
            api.uids["alice"],
            name,
        )
    )[0]
    assert (modified, writer) == (updated, api.uids["alice"])
    response = await api.alice.get(f"{FILES}/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"] == MARKDOWN
    assert response.content == body
    no_disk(api, uid)


async def test_a_raw_body_is_not_parsed_as_json(api: Api) -> None:
    """The deep-JSON guard leaves a workspace file's body alone."""
    body = b"[" * 500 + b"{" * 500
    response = await api.alice.put(f"{FILES}/agents/USER.md", content=body)
    assert response.status_code == 200, response.text
    assert (await api.alice.get(f"{FILES}/agents/USER.md")).content == body


@pytest.mark.parametrize(
    "name",
    [
        "agents/OTHER.md",
        "AGENTS.md",
        "agents",
        "agents/",
        "agents/AGENTS.md/x",
        "agents/agents.md",
        "agents/AGENTS.md%00",
        "%2e%2e/agents/AGENTS.md",
        "agents/%2e%2e/agents/AGENTS.md",
        "%2e/agents/AGENTS.md",
        "agents/%2e/AGENTS.md",
        "threads",
        "%2e%2e/%2e%2e/etc/passwd",
    ],
)
async def test_any_other_name_is_not_found(api: Api, name: str) -> None:
    for method in ("GET", "PUT"):
        response = await api.alice.request(method, f"{FILES}/{name}", content=b"x")
        error_of(response, 404, "not_found")
        no_host_path(api, response)
    # nothing was written at any other name
    assert set(await workspace_files(api, str(api.uids["alice"]))) <= set(WORKSPACE_FILES)


async def test_another_users_workspace_is_never_reachable(api: Api) -> None:
    alice, bob = str(api.uids["alice"]), str(api.uids["bob"])
    secret = b"alice's private notes\n"
    assert (await api.alice.put(f"{FILES}/agents/MEMORY.md", content=secret)).status_code == 200
    # bob reads and writes his own workspace under the same name
    assert (await api.bob.put(f"{FILES}/agents/MEMORY.md", content=b"bob\n")).status_code == 200
    assert (await api.bob.get(f"{FILES}/agents/MEMORY.md")).content == b"bob\n"
    assert (await api.alice.get(f"{FILES}/agents/MEMORY.md")).content == secret
    assert (await workspace_files(api, alice))["agents/MEMORY.md"] == secret
    assert (await workspace_files(api, bob))["agents/MEMORY.md"] == b"bob\n"
    # no spelling of a path leads into alice's workspace
    for name in (
        f"%2e%2e/%2e%2e/{alice}/agents/MEMORY.md",
        f"..%2f{alice}%2fagents%2fMEMORY.md",
        f"{alice}/agents/MEMORY.md",
    ):
        error_of(await api.bob.get(f"{FILES}/{name}"), 404, "not_found")
        error_of(await api.bob.put(f"{FILES}/{name}", content=b"x"), 404, "not_found")
    assert (await workspace_files(api, alice))["agents/MEMORY.md"] == secret
    # and without a token nothing at all
    error_of(await api.anon.get(f"{FILES}/agents/MEMORY.md"), 401, "unauthorized")
    error_of(await api.anon.put(f"{FILES}/agents/MEMORY.md", content=b"x"), 401, "unauthorized")
    no_disk(api, alice)
    no_disk(api, bob)


async def test_at_most_64_kib(api: Api) -> None:
    name = f"{FILES}/agents/USER.md"
    exact = b"a" * PROMPT_LIMIT
    response = await api.alice.put(name, content=exact)
    assert response.status_code == 200 and response.json()["bytes"] == PROMPT_LIMIT
    for size in (PROMPT_LIMIT + 1, 2 * 1024 * 1024):
        response = await api.alice.put(name, content=b"b" * size)
        error_of(response, 413, "payload_too_large")

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b"c" * 4096

    # without a Content-Length (chunked): refused once it is over the limit
    response = await api.alice.put(name, content=chunks())
    error_of(response, 413, "payload_too_large")
    assert (await api.alice.get(name)).content == exact
    assert (await workspace_files(api, str(api.uids["alice"])))["agents/USER.md"] == exact


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xfe not utf-8",
        b"cut \xe4\xb8",
        b"nul \x00 inside",
        "\ud800".encode("utf-8", "surrogatepass"),
    ],
)
async def test_the_body_must_be_utf8_text(api: Api, body: bytes) -> None:
    before = (await api.alice.get(f"{FILES}/agents/AGENTS.md")).content
    response = await api.alice.put(f"{FILES}/agents/AGENTS.md", content=body)
    error_of(response, 400, "invalid_input")
    assert (await api.alice.get(f"{FILES}/agents/AGENTS.md")).content == before


async def test_a_directory_at_the_name_is_refused_never_replaced(api: Api) -> None:
    uid, client = await new_user(api, "sylvia")
    async with client:
        assert (await client.get(f"{FILES}/agents/AGENTS.md")).status_code == 200
        # what a disk could not hold either: a file under agents/USER.md/
        await write_directly(api, uid, "agents/USER.md/notes", b"a directory's file\n")
        response = await client.put(f"{FILES}/agents/USER.md", content=b"overwrite\n")
        error = error_of(response, 400, "invalid_input")
        assert "agents/USER.md is not a regular file" in error["message"]
        no_host_path(api, response)
        error_of(await client.get(f"{FILES}/agents/USER.md"), 404, "not_found")
    assert await workspace_files(api, uid) == {
        "agents/AGENTS.md": AGENTS_TEMPLATE.encode(),
        "agents/USER.md/notes": b"a directory's file\n",
    }
    no_disk(api, uid)


async def test_an_agents_that_is_a_file_is_refused(api: Api) -> None:
    uid, client = await new_user(api, "simon")
    await write_directly(api, uid, "agents", b"not a directory\n")
    async with client:
        for name in WORKSPACE_FILES:
            error_of(await client.get(f"{FILES}/{name}"), 404, "not_found")
            response = await client.put(f"{FILES}/{name}", content=b"x\n")
            error_of(response, 400, "invalid_input")
            no_host_path(api, response)
    # no template next to it, nothing under it
    assert await workspace_files(api, uid) == {"agents": b"not a directory\n"}
    no_disk(api, uid)


async def test_a_new_users_first_run_creates_the_template_and_sees_none_of_it(
    api: Api, worker: None
) -> None:
    uid, client = await new_user(api, "tess")
    api.clients["tess"] = client  # closed with the module's clients
    created = await client.post("/api/chat/thread", json={"agent_id": "chatbot"})
    assert created.status_code == 201, created.text
    submitted = await client.post(
        "/api/agent/runs", json={"thread_id": created.json()["id"], "query": "hi"}
    )
    assert submitted.status_code == 202, submitted.text
    run_id = submitted.json()["run_id"]
    assert (await api.wait_run(run_id, who="tess"))["status"] == "completed"
    # the run made the template, in the store (no GET here made it)
    assert await workspace_files(api, uid) == {"agents/AGENTS.md": AGENTS_TEMPLATE.encode()}
    # comments only: no prompt file was used, so none is in the manifest
    manifest = (await client.get(f"/api/agent/runs/{run_id}/manifest")).json()
    assert manifest["preloaded"] == {}
    # a file with text after its comments is used, its comments left out
    text = AGENTS_TEMPLATE + "Answer in French.\n"
    assert (await client.put(f"{FILES}/agents/AGENTS.md", content=text)).status_code == 200
    again = await client.post(
        "/api/agent/runs", json={"thread_id": created.json()["id"], "query": "hi"}
    )
    second = again.json()["run_id"]
    assert (await api.wait_run(second, who="tess"))["status"] == "completed"
    manifest = (await client.get(f"/api/agent/runs/{second}/manifest")).json()
    assert manifest["preloaded"]["agents/AGENTS.md"]["bytes"] == len(text.encode())
