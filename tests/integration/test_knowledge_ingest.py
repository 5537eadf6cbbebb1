"""Knowledge-base ingestion against real PostgreSQL: the same bytes recorded at once by
many connections make one document; chunks are invisible until their document is ready
(and refused for a document not being processed); a superseded attempt writes nothing;
a worker SIGKILLed mid-ingest leaves nothing searchable, and the document is queued
again and ingested by another; a share revoked after preparation is refused where the
tool executes."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg import AsyncConnection

from tests.integration.conftest import World
from tests.integration.racing import race, successes
from tests.integration.worker_harness import running_worker
from tests.openai_stub import stub_server
from yuxi.files.attachments import stage_bytes
from yuxi.knowledge.documents import commit_documents, staging_directory
from yuxi.knowledge.search import DatabaseKnowledge
from yuxi.queue.errors import LeaseLost, NotFound
from yuxi.queue.knowledge import (
    KbDocument,
    kb_chunks_add,
    kb_create,
    kb_delete,
    kb_document_add,
    kb_document_claim,
    kb_document_ready,
    kb_document_redeliver_stalled,
    kb_search,
    kb_update,
)

SHA = hashlib.sha256(b"x").hexdigest()


async def new_kb(world: World, **fields: Any) -> UUID:
    async with world.pool.connection() as conn:
        return (await kb_create(conn, world.alice, name=fields.pop("name", "KB"), **fields)).id


async def document(world: World, kb: UUID, sha: str = SHA) -> KbDocument:
    async with world.pool.connection() as conn:
        return await kb_document_add(
            conn, world.alice, kb, filename="a.txt", size=1, sha256=sha, media_type="text/plain"
        )


async def test_the_same_bytes_recorded_at_once_make_one_document(world: World) -> None:
    kb = await new_kb(world)

    async def add(conn: AsyncConnection[Any], i: int) -> KbDocument:
        return await kb_document_add(
            conn, world.alice, kb, filename=f"{i}.txt", size=1, sha256=SHA, media_type="text/plain"
        )

    results = await race(world.url, 12, add)
    rows = successes(results)
    assert len(rows) == 12, results
    assert len({row.id for row in rows}) == 1
    assert sum(row.created for row in rows) == 1
    assert await world.value("SELECT count(*) FROM yuxi.kb_documents WHERE kb_id = %s", kb) == 1
    jobs = await world.value(
        "SELECT count(*) FROM procrastinate_jobs WHERE queueing_lock = %s",
        f"kb_document:{rows[0].id}",
    )
    assert jobs == 1


async def test_chunks_are_invisible_until_the_document_is_ready(world: World) -> None:
    kb = await new_kb(world)
    doc = await document(world, kb)
    # a chunk for a queued document is refused, from any writer
    with pytest.raises(psycopg.Error, match="being processed"):
        await world.execute(
            "INSERT INTO yuxi.kb_chunks (document_id, seq, kb_id, text, tokens)"
            " VALUES (%s, 0, %s, 'sneaky', 1)",
            doc.id,
            kb,
        )
    async with world.pool.connection() as conn:
        task = await kb_document_claim(conn, doc.id)
    assert task is not None and task.attempt == 1
    async with await AsyncConnection.connect(world.url) as writer:
        async with writer.transaction():
            await kb_chunks_add(writer, doc.id, 1, 0, ["北极熊住在北极"], [7])
            async with world.pool.connection() as conn:
                assert await kb_search(conn, world.alice, [kb], "北极") == []
            ready = await kb_document_ready(writer, doc.id, 1)
            async with world.pool.connection() as conn:
                assert await kb_search(conn, world.alice, [kb], "北极") == []
        assert ready.status == "ready" and ready.chunks == 1
    async with world.pool.connection() as conn:
        hits = await kb_search(conn, world.alice, [kb], "北极")
    assert [hit.text for hit in hits] == ["北极熊住在北极"]


async def test_a_superseded_attempt_writes_nothing(world: World) -> None:
    kb = await new_kb(world)
    doc = await document(world, kb)
    async with world.pool.connection() as conn:
        first = await kb_document_claim(conn, doc.id)
        second = await kb_document_claim(conn, doc.id)  # a second delivery took it over
        assert first is not None and second is not None and second.attempt == 2
        with pytest.raises(LeaseLost):
            await kb_chunks_add(conn, doc.id, first.attempt, 0, ["stale"], [1])
        with pytest.raises(LeaseLost):
            await kb_document_ready(conn, doc.id, first.attempt)
    assert (
        await world.value("SELECT count(*) FROM yuxi.kb_chunks WHERE document_id = %s", doc.id) == 0
    )


async def test_a_worker_killed_mid_ingest_leaves_nothing_searchable(
    world: World, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    kb = await new_kb(world, name="Slow", embedding_model="openai:embed-slow")
    with stub_server() as stub:
        stub.embedding_delay = 60.0
        staged = await stage_bytes(
            staging_directory(home, kb),
            "slow.txt",
            "企鹅生活在南极。Penguins live in Antarctica.".encode(),
            limit=10**6,
        )
        [doc] = await commit_documents(world.pool, home, world.alice, kb, [staged])
        env = {
            **os.environ,
            "YUXI_DATABASE_URL": db_url,
            "YUXI_HOME": str(home),
            "YUXI_OPENAI_BASE_URL": stub.base_url,
            "YUXI_OPENAI_API_KEY": "sk-test",
            "YUXI_OPENAI_MAX_RETRIES": "0",
        }
        doomed = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "yuxi.cli",
            "worker",
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while not any(r.path == "/v1/embeddings" for r in stub.requests):
                assert time.monotonic() < deadline, "the worker never embedded"
                await asyncio.sleep(0.05)
            doomed.send_signal(signal.SIGKILL)
            await asyncio.wait_for(doomed.wait(), 10)
        finally:
            if doomed.returncode is None:
                doomed.kill()

        status = await world.fetch(
            "SELECT status, attempts, chunks FROM yuxi.kb_documents WHERE id = %s", doc.id
        )
        assert status == [("processing", 1, 0)]
        assert (
            await world.value("SELECT count(*) FROM yuxi.kb_chunks WHERE document_id = %s", doc.id)
            == 0
        )
        async with world.pool.connection() as conn:
            assert await kb_search(conn, world.alice, [kb], "企鹅 penguins") == []
            # once its worker has been silent long enough, the scan queues it again
            assert await kb_document_redeliver_stalled(conn, stalled_seconds=30) == []
            await conn.execute(
                "UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour'"
            )
            await conn.execute(
                "UPDATE yuxi.kb_documents SET updated_at = now() - interval '1 hour' WHERE id = %s",
                (doc.id,),
            )
            [again] = await kb_document_redeliver_stalled(conn, stalled_seconds=30)
        assert (again.document_id, again.status) == (doc.id, "queued")

        stub.embedding_delay = 0.0
        monkeypatch.setenv("YUXI_OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("YUXI_OPENAI_API_KEY", "sk-test")
        async with running_worker(db_url, home):
            deadline = time.monotonic() + 30
            while (
                status := await world.value(
                    "SELECT status FROM yuxi.kb_documents WHERE id = %s", doc.id
                )
            ) != "ready":
                assert status != "failed" and time.monotonic() < deadline, status
                await asyncio.sleep(0.05)
    row = await world.fetch("SELECT attempts, chunks FROM yuxi.kb_documents WHERE id = %s", doc.id)
    assert row == [(2, 1)]
    async with world.pool.connection() as conn:
        hits = await kb_search(conn, world.alice, [kb], "企鹅")
    assert [hit.filename for hit in hits] == ["slow.txt"]


async def test_interrupted_three_times_the_document_fails(world: World) -> None:
    kb = await new_kb(world)
    doc = await document(world, kb)
    async with world.pool.connection() as conn:
        for _ in range(3):
            await kb_document_claim(conn, doc.id)
        await conn.execute(
            "DELETE FROM procrastinate_jobs WHERE queueing_lock = %s", (f"kb_document:{doc.id}",)
        )
        later = await conn.execute("SELECT now() + interval '1 hour'")
        now = (await later.fetchone())[0]  # type: ignore[index]
        cur = await conn.execute(
            "SELECT * FROM yuxi.kb_document_redeliver_stalled(30, 3, 100, %s)", (now,)
        )
        assert [row[1] for row in await cur.fetchall()] == ["failed"]
    failed = await world.fetch("SELECT status, error FROM yuxi.kb_documents WHERE id = %s", doc.id)
    assert failed[0][0] == "failed" and "interrupted 3 times" in failed[0][1]


async def test_a_share_revoked_after_preparation_is_refused_where_the_tool_runs(
    world: World,
) -> None:
    kb = await new_kb(world, name="Shared", share_scope="selected", shared_with=[world.bob])
    knowledge = DatabaseKnowledge(world.pool)
    assert (await knowledge.search(str(world.bob), [str(kb)], "x", 3)).refused == []
    async with world.pool.connection() as conn:
        await kb_update(conn, world.alice, kb, shared_with=[])
    result = await knowledge.search(str(world.bob), [str(kb)], "x", 3)
    assert result.refused == [str(kb)] and result.hits == []


async def test_an_upload_that_outlives_its_knowledge_base_is_a_not_found(
    world: World, tmp_path: Path
) -> None:
    """The knowledge base deleted (its row, then its directory) while a document was
    staged: the upload answers not_found and leaves nothing, never a server error."""
    home = tmp_path / "home"
    for remove_row in (False, True):
        kb = await new_kb(world, name=f"gone-{remove_row}")
        directory = staging_directory(home, kb)
        staged = await stage_bytes(directory, "a.txt", b"soon gone", limit=1 << 20)
        if remove_row:
            async with world.pool.connection() as conn:
                await kb_delete(conn, world.alice, kb)
        shutil.rmtree(directory)
        with pytest.raises(NotFound):
            await commit_documents(world.pool, home, world.alice, kb, [staged])
        assert not directory.exists()
        rows = await world.fetch("SELECT count(*) FROM yuxi.kb_documents WHERE kb_id = %s", kb)
        assert rows == [(0,)]
