"""GET/PUT /api/workspace/files/{name}: the caller's agents/AGENTS.md, USER.md and
MEMORY.md as raw text, over real HTTP, and nothing else of the host."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

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


def agents_dir(api: Api, uid: str) -> Path:
    return api.home / "workspaces" / uid / "agents"


def no_host_path(api: Api, response: httpx.Response) -> None:
    assert str(api.home) not in response.text
    assert str(api.home.resolve()) not in response.text


async def test_a_new_workspace_gets_the_agents_template_on_first_read(api: Api) -> None:
    uid, client = await new_user(api, "wendy")
    async with client:
        assert not agents_dir(api, uid).exists()
        response = await client.get(f"{FILES}/agents/AGENTS.md")
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == MARKDOWN
        assert response.text == AGENTS_TEMPLATE
        assert (agents_dir(api, uid) / "AGENTS.md").read_text() == AGENTS_TEMPLATE
        # the template is comments only
        assert AGENTS_TEMPLATE.strip().startswith("<!--")
        assert AGENTS_TEMPLATE.strip().endswith("-->")
        for name in ("agents/USER.md", "agents/MEMORY.md"):
            error_of(await client.get(f"{FILES}/{name}"), 404, "not_found")
        # a user who empties it keeps it empty: the template is for a new workspace only
        assert (await client.put(f"{FILES}/agents/AGENTS.md", content=b"")).status_code == 200
        assert (await client.get(f"{FILES}/agents/AGENTS.md")).content == b""


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
    datetime.fromisoformat(saved["updated_at"])
    path = api.home / "workspaces" / uid / name
    assert path.read_bytes() == body
    # no temporary file is left next to it
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith(".")) == []
    response = await api.alice.get(f"{FILES}/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"] == MARKDOWN
    assert response.content == body


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


async def test_another_users_workspace_is_never_reachable(api: Api) -> None:
    alice, bob = str(api.uids["alice"]), str(api.uids["bob"])
    secret = b"alice's private notes\n"
    assert (await api.alice.put(f"{FILES}/agents/MEMORY.md", content=secret)).status_code == 200
    # bob reads and writes his own workspace under the same name
    assert (await api.bob.put(f"{FILES}/agents/MEMORY.md", content=b"bob\n")).status_code == 200
    assert (await api.bob.get(f"{FILES}/agents/MEMORY.md")).content == b"bob\n"
    assert (await api.alice.get(f"{FILES}/agents/MEMORY.md")).content == secret
    assert (api.home / "workspaces" / alice / "agents/MEMORY.md").read_bytes() == secret
    assert (api.home / "workspaces" / bob / "agents/MEMORY.md").read_bytes() == b"bob\n"
    # no spelling of a path leads into alice's workspace
    for name in (
        f"%2e%2e/%2e%2e/{alice}/agents/MEMORY.md",
        f"..%2f{alice}%2fagents%2fMEMORY.md",
        f"{alice}/agents/MEMORY.md",
    ):
        error_of(await api.bob.get(f"{FILES}/{name}"), 404, "not_found")
        error_of(await api.bob.put(f"{FILES}/{name}", content=b"x"), 404, "not_found")
    assert (api.home / "workspaces" / alice / "agents/MEMORY.md").read_bytes() == secret
    # and without a token nothing at all
    error_of(await api.anon.get(f"{FILES}/agents/MEMORY.md"), 401, "unauthorized")
    error_of(await api.anon.put(f"{FILES}/agents/MEMORY.md", content=b"x"), 401, "unauthorized")


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


async def test_a_symlink_is_refused_never_followed(api: Api, tmp_path: Path) -> None:
    uid, client = await new_user(api, "sylvia")
    outside = tmp_path / "outside.md"
    outside.write_text("outside\n")
    async with client:
        assert (await client.get(f"{FILES}/agents/AGENTS.md")).status_code == 200
        link = agents_dir(api, uid) / "USER.md"
        link.symlink_to(outside)
        response = await client.put(f"{FILES}/agents/USER.md", content=b"overwrite\n")
        error = error_of(response, 400, "invalid_input")
        assert "symbolic link" in error["message"]
        no_host_path(api, response)
        assert str(tmp_path) not in response.text
        error_of(await client.get(f"{FILES}/agents/USER.md"), 404, "not_found")
        assert outside.read_text() == "outside\n"
        assert link.is_symlink()


async def test_an_agents_directory_that_is_a_symlink_is_refused(api: Api, tmp_path: Path) -> None:
    uid, client = await new_user(api, "simon")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "AGENTS.md").write_text("not yours\n")
    workspace = api.home / "workspaces" / uid
    workspace.mkdir(parents=True)
    (workspace / "agents").symlink_to(elsewhere, target_is_directory=True)
    async with client:
        for name in WORKSPACE_FILES:
            error_of(await client.get(f"{FILES}/{name}"), 404, "not_found")
            response = await client.put(f"{FILES}/{name}", content=b"x\n")
            error_of(response, 400, "invalid_input")
            no_host_path(api, response)
            assert str(tmp_path) not in response.text
    assert sorted(os.listdir(elsewhere)) == ["AGENTS.md"]
    assert (elsewhere / "AGENTS.md").read_text() == "not yours\n"


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
    assert (agents_dir(api, uid) / "AGENTS.md").read_text() == AGENTS_TEMPLATE
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
