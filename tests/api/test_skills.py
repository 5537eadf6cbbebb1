"""Skills over real HTTP with a real worker: admins upload shared skills (raw ZIP or
multipart), users list them; a run resolves its skills' closure, sees their index,
activates one, reads its files under skills/ (never writes them), and its manifest
records each skill's source, version and sha256; a personal skill (``skills/<slug>/`` of
the user's workspace in the file store, never the API's disk) shadows a shared one. The
worker has a YUXI_HOME of its own, as on another host: what it reads of a user's
workspace comes from the store."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.api.conftest import Api, error_of
from tests.fixtures.skills import SKILLS, skill_md, zip_of
from tests.integration.worker_harness import running_worker
from yuxi.files.layout import user_workspace
from yuxi.skills.format import bundle, read_source

pytestmark = pytest.mark.asyncio(loop_scope="module")

ZIP = {"content-type": "application/zip"}


def tool(tool_name: str, **args: Any) -> str:
    return f"/tool {tool_name} " + json.dumps(args)


def zip_files(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


async def workspace_files(api: Api, who: str, prefix: str = "skills") -> dict[str, bytes]:
    """The files under ``prefix`` of the user's workspace tree in the store."""
    rows = await api.sql(
        "SELECT f.path, f.content_id FROM yuxi.file_list(yuxi.workspace_file_tree(%s), %s) f",
        api.uids[who],
        prefix,
    )
    files = {}
    for path, content in rows:
        chunks = await api.sql(
            "SELECT data FROM yuxi.file_chunks_read(%s, 0, 1000) ORDER BY n", content
        )
        files[path] = b"".join(bytes(chunk) for (chunk,) in chunks)
    return files


@pytest.fixture(scope="module")
def worker_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("yuxi-worker-home")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def worker(api: Api, worker_home: Path) -> AsyncIterator[None]:
    """This module's worker, on a home of its own (not the API's)."""
    async with running_worker(api.db_url, worker_home, worker_concurrency=8):
        yield


@pytest_asyncio.fixture(scope="module", loop_scope="module", autouse=True)
async def skills(api: Api, worker: None) -> None:
    """writing-style and report-writer uploaded; the agent ``skilled`` has the file tools
    and selects report-writer (writing-style comes with it), preloading writing-style."""
    # a dependency that does not exist yet is refused at save time
    refused = await api.admin.post("/api/skills", content=zip_of("report-writer"), headers=ZIP)
    assert "do not exist: writing-style" in error_of(refused, 400, "invalid_input")["message"]
    response = await api.admin.post("/api/skills", content=zip_of("writing-style"), headers=ZIP)
    assert response.status_code == 201, response.text
    multipart = {"file": ("report-writer.zip", zip_of("report-writer"), "application/zip")}
    response = await api.admin.post("/api/skills", files=multipart)
    assert response.status_code == 201, response.text
    context = {
        "model": "builtin:scripted",
        "tools": ["read_file", "write_file", "list_files"],
        "skills": ["report-writer"],
        "preload_skills": ["writing-style"],
    }
    response = await api.admin.post(
        "/api/agents",
        json={
            "slug": "skilled",
            "name": "Skilled",
            "backend_id": "chatbot",
            "config": {"context": context},
        },
    )
    assert response.status_code == 201, response.text


async def answer(api: Api, query: str, thread: str | None = None) -> tuple[str, str, str]:
    """(thread, run id, final answer) of one message to ``skilled``."""
    thread = thread or await api.thread(agent="skilled")
    run = await api.submit(thread, query)
    await api.completed(run["run_id"])
    return thread, run["run_id"], str((await api.result(run["run_id"]))["output"])


async def test_uploads_are_versioned_and_admin_only(api: Api) -> None:
    again = await api.admin.post("/api/skills", content=zip_of("writing-style"), headers=ZIP)
    assert again.status_code == 201
    assert again.json() == {
        "slug": "writing-style",
        "version": 1,
        "sha256": read_source(SKILLS / "writing-style").sha256,
        "created": False,
        "source": "shared",
    }
    refused = await api.alice.post("/api/skills", content=zip_of("writing-style"), headers=ZIP)
    error_of(refused, 403, "forbidden")
    bad = await api.admin.post("/api/skills", content=b"not a zip", headers=ZIP)
    assert "not a ZIP" in error_of(bad, 400, "invalid_input")["message"]
    denied = await api.alice.delete("/api/skills/writing-style")
    error_of(denied, 403, "forbidden")


async def test_users_list_and_read_shared_skills(api: Api) -> None:
    listed = (await api.alice.get("/api/skills")).json()
    assert [(s["slug"], s["source"], s["version"]) for s in listed] == [
        ("report-writer", "shared", 1),
        ("writing-style", "shared", 1),
    ]
    writer = listed[0]
    assert writer["depends"] == {"skills": ["writing-style"], "tools": ["calculator"], "mcps": []}
    assert writer["shared_with"] is None  # sharing details are the admins'
    detail = (await api.alice.get("/api/skills/report-writer")).json()
    assert [f["path"] for f in detail["files"]] == ["SKILL.md", "templates/outline.md"]
    assert [v["version"] for v in detail["versions"]] == [1]
    one = await api.alice.get("/api/skills/report-writer/versions/1")
    assert one.status_code == 200
    error_of(await api.alice.get("/api/skills/report-writer/versions/9"), 404, "not_found")
    error_of(await api.alice.get("/api/skills/nothing"), 404, "not_found")


async def test_a_run_has_the_closure_the_index_and_the_files(api: Api, worker_home: Path) -> None:
    thread, run_id, text = await answer(api, tool("activate_skill", name="report-writer"))
    assert text.startswith("tool activate_skill returned: Skill report-writer is active")
    assert "# Report writer" in text
    _, _, text = await answer(
        api, tool("read_file", path="skills/report-writer/templates/outline.md"), thread
    )
    assert "# Status report" in text
    _, _, text = await answer(
        api, tool("write_file", path="skills/report-writer/SKILL.md", content="x"), thread
    )
    assert text.startswith("tool write_file failed:") and "read-only" in text

    manifest = (await api.alice.get(f"/api/agent/runs/{run_id}/manifest")).json()
    sha = {n: read_source(SKILLS / n).sha256 for n in ("report-writer", "writing-style")}
    assert manifest["skills"] == [
        {"slug": "report-writer", "source": "shared", "version": 1, "sha256": sha["report-writer"]},
        {"slug": "writing-style", "source": "shared", "version": 1, "sha256": sha["writing-style"]},
    ]
    assert list(manifest["skills_preloaded"]) == ["writing-style"]
    # the skill's calculator joins the run's tools (shown once the skill is active)
    assert "calculator" in manifest["resources"]["tools"]
    # no host path anywhere in what the client reads
    assert str(api.home) not in json.dumps(manifest)
    assert str(worker_home) not in json.dumps(manifest)


async def test_a_skills_tool_waits_for_its_activation(api: Api) -> None:
    thread, _, text = await answer(api, tool("calculator", expression="6*7"))
    assert text == "tool calculator is not available", text  # not offered to the model
    await answer(api, tool("activate_skill", name="report-writer"), thread)
    _, _, text = await answer(api, tool("calculator", expression="6*7"), thread)
    assert text == "tool calculator returned: 42", text


async def test_a_personal_skill_shadows_the_shared_one(api: Api) -> None:
    mine = {"SKILL.md": skill_md("writing-style", "Alice's own style").encode()}
    response = await api.alice.post(
        "/api/skills?personal=true", content=zip_files(mine), headers=ZIP
    )
    assert response.status_code == 201, response.text
    assert await workspace_files(api, "alice") == {
        "skills/writing-style/SKILL.md": mine["SKILL.md"]
    }
    try:
        listed = (await api.alice.get("/api/skills")).json()
        shared = next(s for s in listed if s["slug"] == "writing-style" and s["source"] == "shared")
        assert shared["shadowed"] is True
        assert any(s["source"] == "personal" for s in listed)
        assert (await api.alice.get("/api/skills/writing-style")).json()["skill"]["shadowed"]
        assert not any(s["shadowed"] for s in (await api.bob.get("/api/skills")).json())

        # the worker reads it from its copy of the workspace, made from the store
        _, run_id, text = await answer(api, tool("read_file", path="skills/writing-style/SKILL.md"))
        assert "Alice's own style" in text
        manifest = (await api.alice.get(f"/api/agent/runs/{run_id}/manifest")).json()
        entry = next(s for s in manifest["skills"] if s["slug"] == "writing-style")
        assert entry["source"] == "personal" and entry["version"] is None
        assert entry["sha256"] == bundle(mine).sha256
    finally:
        gone = await api.alice.delete("/api/skills/writing-style?personal=true")
        assert gone.status_code == 204, gone.text
    assert await workspace_files(api, "alice") == {}


async def test_a_missing_dependency_fails_the_run_clearly(api: Api, worker_home: Path) -> None:
    # the API refuses such a skill: written into bob's workspace in the store directly
    await api.sql(
        "SELECT yuxi.file_write(yuxi.workspace_file_tree(%s), 'skills/needs-ghost/SKILL.md',"
        " %s::bytea)",
        api.uids["bob"],
        skill_md("needs-ghost", "x", skills=["ghost"]).encode(),
    )
    response = await api.admin.post(
        "/api/agents",
        json={
            "slug": "ghostly",
            "name": "Ghostly",
            "backend_id": "chatbot",
            "config": {"context": {"model": "builtin:scripted", "skills": ["needs-ghost"]}},
        },
    )
    assert response.status_code == 201, response.text
    thread = await api.thread("bob", agent="ghostly")
    run = await api.submit(thread, "hello", who="bob")
    view = await api.wait_run(run["run_id"], who="bob")
    assert view["status"] == "failed"
    assert "skill ghost (needed by needs-ghost) is not available" in str(view), view
    assert str(api.home) not in json.dumps(view)
    assert str(worker_home) not in json.dumps(view)
    await api.sql(
        "SELECT yuxi.file_delete(yuxi.workspace_file_tree(%s), 'skills/needs-ghost', true)",
        api.uids["bob"],
    )


async def test_users_upload_and_delete_their_personal_skills(api: Api) -> None:
    notes = {"SKILL.md": skill_md("bob-notes", "Bob's notes", skills=["ghost"]).encode()}
    refused = await api.bob.post("/api/skills?personal=true", content=zip_files(notes))
    assert "ghost" in error_of(refused, 400, "invalid_input")["message"]
    assert await workspace_files(api, "bob") == {}

    # a first version with a file the next one drops: an upload replaces the whole skill
    first = dict(read_source(SKILLS / "writing-style").files) | {"notes/old.md": b"old"}
    response = await api.bob.post(
        "/api/skills?personal=true", content=zip_files(first), headers=ZIP
    )
    assert response.status_code == 201, response.text
    assert "skills/writing-style/notes/old.md" in await workspace_files(api, "bob")

    response = await api.bob.post(
        "/api/skills?personal=true", content=zip_of("writing-style"), headers=ZIP
    )
    assert response.status_code == 201, response.text
    assert response.json() == {
        "slug": "writing-style",
        "version": None,
        "sha256": read_source(SKILLS / "writing-style").sha256,
        "created": True,
        "source": "personal",
    }
    # in bob's workspace in the store, file for file; nothing on the API's disk
    expected = read_source(SKILLS / "writing-style").files
    assert await workspace_files(api, "bob") == {
        f"skills/writing-style/{name}": data for name, data in expected.items()
    }
    workspace = user_workspace(api.home.resolve(), str(api.uids["bob"]))
    assert not (workspace / "skills").exists()
    listed = (await api.bob.get("/api/skills")).json()
    assert [
        (s["slug"], s["source"], s["shadowed"]) for s in listed if s["slug"] == "writing-style"
    ] == [
        ("writing-style", "shared", True),
        ("writing-style", "personal", False),
    ]
    gone = await api.bob.delete("/api/skills/writing-style?personal=true")
    assert gone.status_code == 204
    error_of(await api.bob.delete("/api/skills/writing-style?personal=true"), 404, "not_found")
    assert await workspace_files(api, "bob") == {}
    # the shared one is still there
    assert (await api.bob.get("/api/skills/writing-style")).status_code == 200
