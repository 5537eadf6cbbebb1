"""Knowledge-base ingestion against real PostgreSQL: the same bytes recorded at once by
many connections make one document; chunks are invisible until their document is ready
(and refused for a document not being processed); a superseded attempt writes nothing;
a worker SIGKILLed mid-ingest leaves nothing searchable, and the document is queued
again and ingested by another (each worker on a YUXI_HOME of its own: the original is
read from the file store); a document whose file is gone fails saying so; a share
revoked after preparation is refused where the tool executes; an upload outliving its
knowledge base leaves nothing."""

from __future__ import annotations

import asyncio
import hashlib
import os
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
from yuxi.files.attachments import ReceivedFile
from yuxi.files.store import PostgresFileStore
from yuxi.knowledge.documents import commit_documents
from yuxi.knowledge.ingest import ingest_document
from yuxi.knowledge.search import DatabaseKnowledge
from yuxi.queue.errors import LeaseLost, NotFound
from yuxi.queue.files import kb_file_tree
from yuxi.queue.knowledge import (
    KbDocument,
    kb_chunks_add,
    kb_create,
    kb_delete,
    kb_document_add,
    kb_document_claim,
    kb_document_delete,
    kb_document_ready,
    kb_document_redeliver_stalled,
    kb_search,
    kb_update,
)

SHA = hashlib.sha256(b"x").hexdigest()


async def new_kb(world: World, **fields: Any) -> UUID:
    async with world.pool.connection() as conn:
        return (await kb_create(conn, world.alice, name=fields.pop("name", "KB"), **fields)).id


async def streamed(files: PostgresFileStore, owner: UUID, name: str, data: bytes) -> ReceivedFile:
    """``data`` streamed into an upload of the store (not linked), in pieces as a
    request's body would bring it."""
    received = ReceivedFile.open(files, owner, name, None, limit=1 << 30)
    for start in range(0, len(data), 64 * 1024):
        await received.write(data[start : start + 64 * 1024])
    return received


async def uploaded(world: World, kb: UUID, name: str, data: bytes) -> KbDocument:
    """``data`` uploaded as ``name`` into the store and recorded, as the API does."""
    staged = await streamed(PostgresFileStore(world.pool), world.alice, name, data)
    [doc] = await commit_documents(world.pool, world.alice, kb, [staged])
    return doc


async def store_state(world: World, kb: UUID) -> tuple[list[str], int]:
    """The paths of the knowledge base's tree, and the unfinished contents of alice."""
    paths = await world.fetch(
        "SELECT f.path FROM yuxi.file_trees t, LATERAL yuxi.file_list(t.id) f"
        " WHERE t.kind = 'knowledge_base' AND t.root = %s",
        str(kb),
    )
    unfinished = await world.value(
        "SELECT count(*) FROM yuxi.file_contents WHERE owner_uid = %s AND sha256 IS NULL",
        world.alice,
    )
    return [row[0] for row in paths], int(unfinished)


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
    kb = await new_kb(world, name="Slow", embedding_model="openai:embed-slow")
    with stub_server() as stub:
        stub.embedding_delay = 60.0
        doc = await uploaded(
            world, kb, "slow.txt", "企鹅生活在南极。Penguins live in Antarctica.".encode()
        )
        env = {
            **os.environ,
            "YUXI_DATABASE_URL": db_url,
            "YUXI_HOME": str(tmp_path / "doomed-home"),
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
        # another worker, another (empty) home: it reads the original from the store
        async with running_worker(db_url, tmp_path / "second-home"):
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
    world: World,
) -> None:
    """The knowledge base deleted while a document streamed into the store: the upload
    answers not_found and leaves nothing (no document, no file, no tree, no unfinished
    content), never a server error."""
    files = PostgresFileStore(world.pool)
    kb = await new_kb(world, name="gone")
    staged = await streamed(files, world.alice, "a.txt", b"soon gone")
    async with world.pool.connection() as conn:
        await kb_delete(conn, world.alice, kb)
    with pytest.raises(NotFound):
        await commit_documents(world.pool, world.alice, kb, [staged])
    assert await world.fetch("SELECT count(*) FROM yuxi.kb_documents WHERE kb_id = %s", kb) == [
        (0,)
    ]
    assert await store_state(world, kb) == ([], 0)
    trees = await world.value(
        "SELECT count(*) FROM yuxi.file_trees WHERE kind = 'knowledge_base' AND root = %s", str(kb)
    )
    assert trees == 0


async def test_a_knowledge_base_deleted_while_an_upload_links_keeps_no_tree(
    world: World,
) -> None:
    """kb_delete waits for an upload that is linking an original (it holds the
    document's row), then drops the tree that upload made: nothing outlives the base."""
    files = PostgresFileStore(world.pool)
    kb = await new_kb(world, name="raced")
    staged = await streamed(files, world.alice, "r.txt", b"racing bytes")
    async with world.pool.connection() as conn, conn.transaction():
        doc = await kb_document_add(
            conn,
            world.alice,
            kb,
            filename="r.txt",
            size=staged.size,
            sha256=staged.sha256,
            media_type="text/plain",
        )
        tree = await kb_file_tree(conn, kb)
        await staged.upload.put(tree, str(doc.id), media_type="text/plain", conn=conn)
        deleting = asyncio.create_task(_delete_kb(world, kb))
        await asyncio.sleep(0.3)
        assert not deleting.done()  # it waits for this transaction
    await asyncio.wait_for(deleting, 10)
    assert await store_state(world, kb) == ([], 0)
    trees = await world.value(
        "SELECT count(*) FROM yuxi.file_trees WHERE kind = 'knowledge_base' AND root = %s", str(kb)
    )
    assert trees == 0
    files_left = await world.value(
        "SELECT count(*) FROM yuxi.files f JOIN yuxi.file_trees t ON t.id = f.tree_id"
        " WHERE t.owner_uid = %s",
        world.alice,
    )
    assert files_left == 0


async def _delete_kb(world: World, kb: UUID) -> None:
    async with await AsyncConnection.connect(world.url, autocommit=True) as conn:
        await kb_delete(conn, world.alice, kb)


async def test_a_document_whose_file_is_gone_fails_saying_so(world: World) -> None:
    """Ingestion reads the original from the store; once it is gone, the document
    fails with a message telling the user to upload it again (no retry)."""
    files = PostgresFileStore(world.pool)
    kb = await new_kb(world, name="Lost")
    doc = await uploaded(world, kb, "lost.md", b"# Lost\n\nA page that will be lost.")
    assert await store_state(world, kb) == ([str(doc.id)], 0)
    await files.delete(await files.kb_tree(kb), str(doc.id))
    ended = await ingest_document(world.pool, files, doc.id)
    assert ended is not None and ended.status == "failed", ended
    assert ended.error == "lost.md: the uploaded file is missing; upload it again"
    assert ended.attempts == 1

    # uploaded again, the same bytes are the same document, queued again with its file
    again = await uploaded(world, kb, "lost.md", b"# Lost\n\nA page that will be lost.")
    assert (again.id, again.created, again.status) == (doc.id, False, "queued")
    assert await store_state(world, kb) == ([str(doc.id)], 0)
    ended = await ingest_document(world.pool, files, doc.id)
    assert ended is not None and (ended.status, ended.chunks) == ("ready", 1), ended


async def test_requests_with_the_same_files_in_other_orders_all_succeed(
    world: World,
) -> None:
    """Ten requests at once, each with the same two files in either order (and one with
    a file twice): every one succeeds, with one document and one file per content,
    never a deadlock between the documents' rows and the tree's lock."""
    files = PostgresFileStore(world.pool)
    kb = await new_kb(world, name="Orders")
    contents = {"a.txt": b"alpha " * 300_000, "b.txt": b"beta " * 10}  # one of 2 chunks

    async def request(names: list[str]) -> list[KbDocument]:
        staged = [await streamed(files, world.alice, name, contents[name]) for name in names]
        return await commit_documents(world.pool, world.alice, kb, staged)

    orders = [["a.txt", "b.txt"], ["b.txt", "a.txt"]] * 5 + [["b.txt", "b.txt"]]
    results = await asyncio.gather(*(request(order) for order in orders))
    ids = {
        name: {
            row.id
            for rows, order in zip(results, orders, strict=True)
            for row, n in zip(rows, order, strict=True)
            if n == name
        }
        for name in contents
    }
    assert all(len(found) == 1 for found in ids.values()), ids
    assert sum(row.created for rows in results for row in rows) == 2
    paths, unfinished = await store_state(world, kb)
    assert sorted(paths) == sorted(str(found.pop()) for found in ids.values())
    assert unfinished == 0
    # the owner's trees hold each content once
    assert (
        await world.value(
            "SELECT count(*) FROM yuxi.file_contents WHERE owner_uid = %s", world.alice
        )
        == 2
    )


async def test_deleting_a_document_removes_its_file_with_it(world: World) -> None:
    files = PostgresFileStore(world.pool)
    kb = await new_kb(world, name="Tidy")
    keep = await uploaded(world, kb, "keep.txt", b"kept")
    drop = await uploaded(world, kb, "drop.txt", b"dropped")
    assert sorted((await store_state(world, kb))[0]) == sorted([str(keep.id), str(drop.id)])
    async with world.pool.connection() as conn:
        await kb_document_delete(conn, world.alice, kb, drop.id)
    assert await store_state(world, kb) == ([str(keep.id)], 0)
    # a reader of the share cannot delete: the file stays
    with pytest.raises(NotFound):
        async with world.pool.connection() as conn:
            await kb_document_delete(conn, world.bob, kb, keep.id)
    assert [info.path for info in await files.list(await files.kb_tree(kb))] == [str(keep.id)]
