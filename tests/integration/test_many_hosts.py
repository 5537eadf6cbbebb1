"""Many hosts on one database, as docs/deployment.md draws them: real processes with a
`YUXI_HOME` each (API A, worker B, API C, later a worker D on a new, empty home). Every
file a user needs is in PostgreSQL, so each host sees the same attachments, outputs,
workspace prompts and memory; no API host keeps a file."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import World
from tests.integration.hosts import Hosts
from tests.mcp_servers import free_port
from yuxi.queue.users import token_create

pytestmark = pytest.mark.slow


@contextlib.asynccontextmanager
async def api(hosts: Hosts, name: str, token: str) -> AsyncIterator[httpx.AsyncClient]:
    port = free_port()
    await hosts.start(name, "api", port)
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    ) as client:
        deadline = time.monotonic() + 60
        while True:
            try:
                if (await client.get("/api/system/health")).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, hosts.log(name)
            await asyncio.sleep(0.2)
        yield client


async def _run(client: httpx.AsyncClient, thread: str, query: str) -> dict[str, Any]:
    submitted = await client.post("/api/agent/runs", json={"thread_id": thread, "query": query})
    assert submitted.status_code == 202, submitted.text
    run_id = submitted.json()["run_id"]
    for _ in range(600):
        result = (await client.get(f"/api/agent/runs/{run_id}/result")).json()
        if result["status"] not in ("pending", "running"):
            return {"run_id": run_id, **result}
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {run_id} did not end")


async def _documents_ready(client: httpx.AsyncClient, kb: str) -> list[dict[str, Any]]:
    for _ in range(600):
        documents = (await client.get(f"/api/knowledge-bases/{kb}/documents")).json()
        if documents and all(d["status"] in ("ready", "failed") for d in documents):
            return list(documents)
        await asyncio.sleep(0.1)
    raise AssertionError(f"documents of {kb} still being ingested")


async def _search(client: httpx.AsyncClient, kb: str, query: str) -> list[dict[str, Any]]:
    found = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": query})
    assert found.status_code == 200, found.text
    return list(found.json()["results"])


async def test_every_host_sees_the_same_files(
    world: World, db_url: str, new_database: Callable[[], str], tmp_path: Path
) -> None:
    async with world.pool.connection() as conn:
        token = await token_create(conn, world.alice)
    await world.execute(
        'UPDATE yuxi.agents SET config_json = \'{"context": {"model": "builtin:scripted",'
        " \"enable_memory\": true}}' WHERE slug = 'chatbot'"
    )
    hosts = Hosts(db_url, tmp_path)
    try:
        async with api(hosts, "a", token) as a, api(hosts, "c", token) as c:
            await hosts.start("b", "worker")
            thread = (await a.post("/api/chat/thread", json={"agent_id": "chatbot"})).json()["id"]

            # an attachment uploaded through A is read by the agent on B
            uploaded = await a.post(
                f"/api/chat/thread/{thread}/attachments",
                files={"file": ("note.txt", b"the secret is 42", "text/plain")},
            )
            assert uploaded.status_code in (200, 201), uploaded.text
            read = await _run(c, thread, '/tool read_file {"path": "uploads/note.txt"}')
            assert read["status"] == "completed", read
            assert "the secret is 42" in read["output"]

            # what the agent on B writes, C lists and serves, whole and by range
            report = "# report\n" + "x" * 100
            wrote = await _run(
                a,
                thread,
                "/tool write_file " + json.dumps({"path": "outputs/report.md", "content": report}),
            )
            assert wrote["status"] == "completed", wrote
            artifacts = (await c.get(f"/api/chat/thread/{thread}/artifacts")).json()
            assert "outputs/report.md" in json.dumps(artifacts)
            whole = await c.get(
                f"/api/chat/thread/{thread}/files/content", params={"path": "outputs/report.md"}
            )
            assert whole.status_code == 200 and whole.text == report
            part = await c.get(
                f"/api/chat/thread/{thread}/files/content",
                params={"path": "outputs/report.md"},
                headers={"Range": "bytes=2-7"},
            )
            assert part.status_code == 206 and part.text == report[2:8]

            # AGENTS.md put through A is in the next run's prompt on B (its manifest
            # records the digest of what preparation read)
            prompt = b"Answer in French."
            put = await a.put("/api/workspace/files/agents/AGENTS.md", content=prompt)
            assert put.status_code == 200, put.text
            after = await _run(c, thread, "hello")
            manifest = (await c.get(f"/api/agent/runs/{after['run_id']}/manifest")).json()
            preloaded = json.dumps(manifest)
            assert hashlib.sha256(prompt).hexdigest() in preloaded

            # a memory edit on B reads back through C
            await a.put("/api/workspace/files/agents/MEMORY.md", content=b"- likes tea\n")
            remembered = await _run(a, thread, '/tool memory_append {"text": "- has a cat"}')
            assert remembered["status"] == "completed", remembered
            memory = await c.get("/api/workspace/files/agents/MEMORY.md")
            assert "- likes tea" in memory.text and "- has a cat" in memory.text

            # a knowledge document uploaded through A is ingested on B, found through C
            kb = (await a.post("/api/knowledge-bases", json={"name": "Notes"})).json()["id"]
            added = await a.post(
                f"/api/knowledge-bases/{kb}/documents",
                files=[("file", ("ferns.md", b"# Ferns\n\nFerns grow in shade.", "text/markdown"))],
            )
            assert added.status_code == 201, added.text
            assert [d["status"] for d in await _documents_ready(c, kb)] == ["ready"]
            [hit] = await _search(c, kb, "ferns shade")
            assert hit["filename"] == "ferns.md" and "grow in shade" in hit["text"]

            # a worker on a new, empty home runs the next turn of the old thread
            await hosts.stop("b")
            await hosts.start("d", "worker")
            later = await _run(a, thread, '/tool read_file {"path": "outputs/report.md"}')
            assert later["status"] == "completed", later
            assert "# report" in later["output"]
            await hosts.stop("d")
    finally:
        for name in list(hosts.processes):
            await hosts.stop(name)
    # the API hosts keep no file of anyone's
    for name in ("a", "c"):
        assert not (hosts.home(name) / "workspaces").exists(), name
        assert not (hosts.home(name) / "knowledge").exists(), name

    # one dump is the whole state: restored into a new database, served by hosts with
    # new, empty homes (the same server key), every file, search hit and prompt is back
    dumped = tmp_path / "yuxi.dump"
    target = new_database()
    for command, url in (("dump", db_url), ("restore", target)):
        done = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "yuxi.cli",
            "db",
            command,
            str(dumped),
            env={**os.environ, "YUXI_DATABASE_URL": url, "YUXI_HOME": str(tmp_path / "ops")},
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await done.communicate()
        assert done.returncode == 0, err.decode()
    restored = Hosts(target, tmp_path / "restored", key=hosts.key)
    restored.root.mkdir()
    try:
        async with api(restored, "e", token) as e:
            await restored.start("f", "worker")
            note = await e.get(
                f"/api/chat/thread/{thread}/files/content", params={"path": "uploads/note.txt"}
            )
            assert note.status_code == 200 and note.text == "the secret is 42"
            again = await e.get(
                f"/api/chat/thread/{thread}/files/content", params={"path": "outputs/report.md"}
            )
            assert again.status_code == 200 and again.text == report
            [hit] = await _search(e, kb, "ferns shade")
            assert hit["filename"] == "ferns.md"
            memory = await e.get("/api/workspace/files/agents/MEMORY.md")
            assert "- likes tea" in memory.text and "- has a cat" in memory.text
            turn = await _run(e, thread, '/tool read_file {"path": "uploads/note.txt"}')
            assert turn["status"] == "completed" and "the secret is 42" in turn["output"], turn
            manifest = (await e.get(f"/api/agent/runs/{turn['run_id']}/manifest")).json()
            assert hashlib.sha256(prompt).hexdigest() in json.dumps(manifest)
    finally:
        for name in list(restored.processes):
            await restored.stop(name)
