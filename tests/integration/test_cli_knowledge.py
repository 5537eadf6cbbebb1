"""``yuxi kb``: create, upload (into the file store) with progress while a worker on
another host's YUXI_HOME ingests, list, search, as an operator would from a shell;
``yuxi db status`` says whether vector indexing is on."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.integration.conftest import World
from tests.integration.worker_harness import running_worker


async def _yuxi(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "yuxi.cli",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_kb_create_upload_list_search(world: World, db_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "YUXI_DATABASE_URL": db_url, "YUXI_HOME": str(home)}
    code, out, err = await _yuxi(env, "kb", "create", "Field notes", "--owner", "alice")
    assert code == 0, err
    kb_id = out.strip().splitlines()[-1]
    assert "alice/field-notes" in err

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "birds.md").write_text("# Birds\n\nThe kingfisher dives for fish.")
    (docs / "trees.txt").write_text("银杏树的叶子在秋天变黄。")
    (docs / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n0000")
    worker_home = tmp_path / "worker-home"  # as on another host: nothing shared but the database
    async with running_worker(db_url, worker_home):
        code, out, err = await _yuxi(
            env, "kb", "upload", "alice/field-notes", *(str(p) for p in sorted(docs.iterdir()))
        )
    assert code == 1, (out, err)  # the picture failed
    lines = out.splitlines()
    assert "[1/3] uploaded birds.md" in lines[0] and "new" in lines[0]
    assert any("ready birds.md: 1 chunks" in line for line in lines), out
    assert any("ready trees.txt: 1 chunks" in line for line in lines), out
    assert any("failed photo.png: " in line and "unsupported" in line for line in lines), out
    assert "3 documents: 2 ready, 1 failed" in err
    # the originals are the knowledge base's files in the store, named by document id
    stored = await world.fetch(
        "SELECT d.filename, f.bytes, f.sha256 = d.sha256 FROM yuxi.kb_documents d"
        " JOIN yuxi.file_trees t ON t.kind = 'knowledge_base' AND t.root = d.kb_id::text"
        " JOIN LATERAL yuxi.file_list(t.id) f ON f.path = d.id::text"
        " WHERE d.kb_id = %s ORDER BY d.filename",
        kb_id,
    )
    assert stored == [
        (p.name, p.stat().st_size, True) for p in sorted(docs.iterdir(), key=lambda p: p.name)
    ]
    assert not (home / "knowledge").exists() and not (worker_home / "knowledge").exists()

    code, out, err = await _yuxi(env, "kb", "list")
    assert code == 0, err
    assert "alice/field-notes" in out and kb_id in out

    code, out, err = await _yuxi(env, "kb", "search", kb_id, "银杏")
    assert code == 0, err
    assert out.startswith("[1] trees.txt chunk 0"), out
    code, out, err = await _yuxi(env, "kb", "search", "alice/field-notes", "kingfisher", "--json")
    assert code == 0 and '"filename": "birds.md"' in out, (out, err)
    code, out, err = await _yuxi(env, "kb", "search", "bob/nothing", "x")
    assert code == 1 and "not found" in err

    code, out, err = await _yuxi(env, "db", "status")
    assert code == 0, err
    vector = await world.value("SELECT vector_indexing FROM yuxi.kb_vector_status()")
    assert f"vector indexing: {'on' if vector else 'off'}" in out
