"""Importing the files an install kept under $YUXI_HOME before the file store
(yuxi/files/importer.py): everything lands in its tree, once; what has no owner any more
is left out and said."""

from __future__ import annotations

import hashlib
from pathlib import Path
from uuid import uuid4

from tests.integration.conftest import World
from yuxi.files.importer import MARKER, import_home, import_needed
from yuxi.files.store import WORKDIR, PostgresFileStore
from yuxi.queue.knowledge import kb_create, kb_document_add


def _put(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


async def test_an_old_home_is_imported_once(world: World, tmp_path: Path) -> None:
    home = tmp_path / "home"
    thread = await world.thread()
    workspace = home / "workspaces" / str(world.alice)
    _put(workspace / "agents" / "AGENTS.md", b"be brief")
    _put(workspace / "skills" / "mine" / "SKILL.md", b"---\nname: mine\n---\n")
    _put(workspace / "threads" / str(thread) / "outputs" / "report.md", b"# report")
    _put(workspace / "threads" / str(thread) / "uploads" / ".upload-abc.part", b"staging")
    _put(workspace / "threads" / str(uuid4()) / "lost.txt", b"no conversation")
    _put(workspace / "projects" / "p1" / "notes.txt", b"project notes")
    _put(home / "workspaces" / str(uuid4()) / "agents" / "USER.md", b"no such user")
    async with world.pool.connection() as conn:
        kb = await kb_create(conn, world.alice, name="docs")
        doc = await kb_document_add(
            conn,
            world.alice,
            kb.id,
            filename="a.txt",
            size=5,
            sha256=hashlib.sha256(b"hello").hexdigest(),
            media_type="text/plain",
        )
    _put(home / "knowledge" / str(kb.id) / str(doc.id), b"hello")
    _put(home / "knowledge" / str(kb.id) / str(uuid4()), b"no such document")

    said: list[str] = []
    assert import_needed(home)
    report = await import_home(world.pool, home, progress=said.append)
    assert (report.imported, report.skipped) == (5, 0)
    assert len(report.left_out) == 3
    assert any("no such conversation" in line for line in report.left_out)
    assert any("no such user" in line for line in report.left_out)
    assert any("no such document" in line for line in report.left_out)

    store = PostgresFileStore(world.pool)
    ws = await store.workspace_tree(world.alice)
    assert [f.path for f in await store.list(ws)] == ["agents/AGENTS.md", "skills/mine/SKILL.md"]
    workdir = await store.workdir_tree(world.alice, thread)
    assert await store.read(workdir, "outputs/report.md", limit=100) == b"# report"
    assert [f.path for f in await store.list(workdir)] == ["outputs/report.md"]
    project = await store.tree(world.alice, WORKDIR, "projects/p1")
    assert await store.read(project, "notes.txt", limit=100) == b"project notes"
    assert await store.read(await store.kb_tree(kb.id), str(doc.id), limit=100) == b"hello"

    # a second run does nothing, and says so by doing nothing
    assert not import_needed(home)
    again = await import_home(world.pool, home, progress=said.append)
    assert again.already and again.imported == 0
    # without the marker (removed by hand) it finds everything there already
    (home / MARKER).unlink()
    third = await import_home(world.pool, home, progress=said.append)
    assert (third.imported, third.skipped) == (0, 5)
    assert await world.value("SELECT count(*) FROM yuxi.files") == 5


async def test_a_home_without_files_needs_no_import(tmp_path: Path) -> None:
    home = tmp_path / "fresh"
    assert not import_needed(home)
    assert (home / MARKER).exists()
