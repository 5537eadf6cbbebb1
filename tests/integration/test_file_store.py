"""The file store (sql/schema/26_file_store.sql, yuxi/files/store.py) on a real
PostgreSQL: files stream in and out in chunks, paths and limits hold for every writer
(psql included), racing writers cannot pass a limit, and garbage collection never
removes what a writer is linking."""

from __future__ import annotations

import hashlib
import os
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg import AsyncConnection

from tests.integration.conftest import World
from tests.integration.racing import failures, race, successes
from yuxi.files.store import KNOWLEDGE_BASE, WORKDIR, WORKSPACE, PostgresFileStore
from yuxi.queue.errors import InvalidInput, NotFound, PayloadTooLarge
from yuxi.queue.files import CHUNK_BYTES, file_gc, file_write

MiB = CHUNK_BYTES


@pytest.fixture
def store(world: World) -> PostgresFileStore:
    return PostgresFileStore(world.pool)


async def _limits(world: World, **limits: int) -> None:
    sets = ", ".join(f"{name} = {value}" for name, value in limits.items())
    await world.execute(f"UPDATE yuxi.file_limits SET {sets}")


async def test_a_file_streams_in_and_out_in_chunks(world: World, store: PostgresFileStore) -> None:
    tree = await store.tree(world.alice, WORKDIR, "threads/t1")
    data = os.urandom(2 * MiB + 12345)
    async with store.upload(world.alice) as upload:
        for at in range(0, len(data), 65536):  # pieces as a network would hand them
            await upload.write(data[at : at + 65536])
        info = await upload.put(tree, "outputs/report.bin", media_type="application/octet-stream")
    assert (info.bytes, info.chunks) == (len(data), 3)
    assert info.sha256 == hashlib.sha256(data).hexdigest()
    assert b"".join([p async for p in store.stream(info)]) == data
    # byte ranges across chunk boundaries, and at the edges
    for start, end in [(0, 1), (MiB - 3, MiB + 3), (MiB, 2 * MiB), (len(data) - 5, None), (7, 7)]:
        got = b"".join([p async for p in store.stream(info, start, end)])
        assert got == data[start:end]
    # each chunk but the last is exactly 1 MiB
    sizes = await world.fetch(
        "SELECT n, octet_length(data) FROM yuxi.file_chunks WHERE content_id = %s ORDER BY n",
        info.content_id,
    )
    assert sizes == [(0, MiB), (1, MiB), (2, 12345)]
    assert [f.path for f in await store.list(tree)] == ["outputs/report.bin"]
    assert [f.path for f in await store.list(tree, "outputs")] == ["outputs/report.bin"]
    assert await store.list(tree, "output") == []


async def test_a_failed_upload_leaves_nothing(world: World, store: PostgresFileStore) -> None:
    tree = await store.tree(world.alice, WORKSPACE)
    with pytest.raises(RuntimeError):
        async with store.upload(world.alice) as upload:
            await upload.write(os.urandom(MiB + 10))
            raise RuntimeError("the client went away")
    assert await world.value("SELECT count(*) FROM yuxi.file_contents") == 0
    assert await world.value("SELECT count(*) FROM yuxi.file_chunks") == 0
    assert await store.list(tree) == []


async def test_paths_are_refused_by_the_database_itself(
    world: World, store: PostgresFileStore
) -> None:
    tree = await store.tree(world.alice, WORKSPACE)
    for bad in ["../x", "a/../b", "/etc/passwd", "a//b", "a/", ".", "a/./b", "a\\b", "a\x01b",
                "x" * 256, "/".join(["d"] * 600)]:  # fmt: skip
        with pytest.raises(InvalidInput):
            await store.write(tree, bad, b"x")
    # straight into the table from psql: the constraint holds too
    info = await store.write(tree, "ok.txt", b"fine")
    with pytest.raises(psycopg.errors.CheckViolation):
        await world.execute(
            "INSERT INTO yuxi.files (tree_id, path, content_id, bytes, sha256, media_type)"
            " VALUES (%s, '../escape', %s, 4, %s, 'text/plain')",
            tree,
            info.content_id,
            info.sha256,
        )
    # NUL never reaches the database as text
    with pytest.raises((InvalidInput, psycopg.DataError, ValueError)):
        await store.write(tree, "a\x00b", b"x")
    assert [f.path for f in await store.list(tree)] == ["ok.txt"]


async def test_same_bytes_are_kept_once_per_owner_never_across_owners(
    world: World, store: PostgresFileStore
) -> None:
    mine = await store.tree(world.alice, WORKSPACE)
    also_mine = await store.tree(world.alice, WORKDIR, "threads/t")
    theirs = await store.tree(world.bob, WORKSPACE)
    a = await store.write(mine, "a.txt", b"same bytes")
    b = await store.write(also_mine, "b.txt", b"same bytes")
    c = await store.write(theirs, "c.txt", b"same bytes")
    assert a.content_id == b.content_id != c.content_id
    assert await world.value("SELECT count(*) FROM yuxi.file_contents") == 2


async def test_a_replaced_file_counts_once(world: World, store: PostgresFileStore) -> None:
    tree = await store.tree(world.alice, WORKSPACE)
    await store.write(tree, "notes.md", b"x" * 100)
    await store.write(tree, "notes.md", b"y" * 30)
    row = await world.fetch("SELECT bytes, files FROM yuxi.file_trees WHERE id = %s", tree)
    assert row == [(30, 1)]
    assert await world.value("SELECT bytes FROM yuxi.file_owners WHERE uid = %s", world.alice) == 30
    assert await store.read(tree, "notes.md", limit=100) == b"y" * 30
    assert await store.delete(tree, "notes.md") == 1
    assert await world.fetch("SELECT bytes, files FROM yuxi.file_trees WHERE id = %s", tree) == [
        (0, 0)
    ]


async def _write(url_world: World, tree: UUID, size: int) -> Any:
    async def write(conn: AsyncConnection[Any], i: int) -> Any:
        return await file_write(conn, tree, f"f{i}.bin", os.urandom(size))

    return await race(url_world.url, 10, write)


async def test_racing_writers_cannot_pass_a_trees_limit(
    world: World, store: PostgresFileStore
) -> None:
    await _limits(world, tree_max_bytes=5 * 2000)
    tree = await store.tree(world.alice, WORKDIR, "threads/t")
    results = await _write(world, tree, 2000)
    assert len(successes(results)) == 5
    assert all(isinstance(e, PayloadTooLarge) for e in failures(results))
    assert await world.fetch("SELECT bytes, files FROM yuxi.file_trees WHERE id = %s", tree) == [
        (10000, 5)
    ]
    assert await world.value("SELECT sum(bytes) FROM yuxi.files WHERE tree_id = %s", tree) == 10000


async def test_racing_writers_cannot_pass_an_owners_limit_across_trees(
    world: World, store: PostgresFileStore
) -> None:
    await _limits(world, owner_max_bytes=3 * 1000)
    trees = [await store.tree(world.alice, WORKDIR, f"threads/t{i}") for i in range(10)]

    async def write(conn: AsyncConnection[Any], i: int) -> Any:
        return await file_write(conn, trees[i], "f.bin", os.urandom(1000))

    results = await race(world.url, 10, write)
    assert len(successes(results)) == 3
    assert all(isinstance(e, PayloadTooLarge) for e in failures(results))
    assert (
        await world.value("SELECT bytes FROM yuxi.file_owners WHERE uid = %s", world.alice) == 3000
    )
    assert await world.value("SELECT sum(bytes) FROM yuxi.files") == 3000


async def test_per_file_and_file_count_limits(world: World, store: PostgresFileStore) -> None:
    await _limits(world, file_max_bytes=10, tree_max_files=2)
    tree = await store.tree(world.alice, KNOWLEDGE_BASE, str(world.project))
    with pytest.raises(PayloadTooLarge, match="at most 10"):
        await store.write(tree, "big", b"x" * 11)
    await store.write(tree, "a", b"1")
    await store.write(tree, "b", b"2")
    with pytest.raises(PayloadTooLarge, match="2 files"):
        await store.write(tree, "c", b"3")
    await store.write(tree, "a", b"replaced")  # a replacement is not one more file


async def test_two_writers_finishing_the_same_new_bytes_keep_one_content(
    world: World, store: PostgresFileStore
) -> None:
    tree = await store.tree(world.alice, WORKSPACE)
    data = os.urandom(5000)

    async def write(conn: AsyncConnection[Any], i: int) -> Any:
        return await file_write(conn, tree, f"copy{i}", data)

    results = await race(world.url, 10, write)
    assert failures(results) == []
    assert len({r.content_id for r in results}) == 1
    assert await world.value("SELECT count(*) FROM yuxi.file_contents") == 1


async def test_gc_removes_what_no_file_names_and_unfinished_uploads_past_their_lease(
    world: World, store: PostgresFileStore
) -> None:
    tree = await store.tree(world.alice, WORKSPACE)
    await store.write(tree, "kept", b"kept")
    await store.write(tree, "gone", b"gone")
    await store.delete(tree, "gone")
    live = store.upload(world.alice)
    await live.write(os.urandom(MiB + 1))  # one chunk sent, its writer still at work
    stale = await world.value(
        "SELECT yuxi.file_content_begin(%s, p_now => now() - interval '1 hour')", world.alice
    )
    async with world.pool.connection() as conn:
        result = await file_gc(conn)
    assert (result.contents, result.bytes) == (2, 4)
    remaining = await world.fetch(
        "SELECT sha256 IS NULL, bytes FROM yuxi.file_contents ORDER BY id"
    )
    assert remaining == [(False, 4), (True, MiB)]
    assert stale not in [r[0] for r in await world.fetch("SELECT id FROM yuxi.file_contents")]
    info = await live.put(tree, "late", media_type="application/octet-stream")
    assert info.bytes == MiB + 1
    # a chunk for a content the collector removed is refused, never stored
    with pytest.raises(psycopg.Error) as refused:
        await world.value("SELECT yuxi.file_content_append(%s, 0, 'x'::bytea)", stale)
    assert refused.value.sqlstate == "YN001"
    assert (
        await world.value(
            "SELECT value FROM yuxi.maintenance_counters WHERE name = 'file_contents_removed'"
        )
        == 2
    )


async def test_gc_never_removes_a_content_a_writer_is_linking(
    world: World, store: PostgresFileStore
) -> None:
    """Each round: a finished content no file names, and at once a writer of the same
    bytes (who links that content) and the collector. Whoever wins, the file is there
    with its bytes."""
    tree = await store.tree(world.alice, WORKSPACE)
    for round_ in range(15):
        data = f"round {round_}".encode()
        await store.write(tree, "tmp", data)
        await store.delete(tree, "tmp")

        async def act(
            conn: AsyncConnection[Any], i: int, path: str = f"r{round_}", data: bytes = data
        ) -> Any:
            if i == 0:
                return await file_write(conn, tree, path, data)
            return await file_gc(conn)

        results = await race(world.url, 2, act)
        assert failures(results) == []
        assert await store.read(tree, f"r{round_}", limit=100) == data
    orphans = await world.value(
        "SELECT count(*) FROM yuxi.files f"
        " LEFT JOIN yuxi.file_contents c ON c.id = f.content_id WHERE c.id IS NULL"
    )
    assert orphans == 0


async def test_chunks_must_come_in_order_and_full(world: World) -> None:
    content = await world.value("SELECT yuxi.file_content_begin(%s)", world.alice)
    append = "SELECT yuxi.file_content_append(%s, %s, %s::bytea)"
    with pytest.raises(psycopg.Error) as early:
        await world.value(append, content, 1, b"x")
    await world.value(append, content, 0, b"short")
    with pytest.raises(psycopg.Error) as after_short:  # chunk 0 was not 1 MiB: nothing follows
        await world.value(append, content, 1, b"x")
    with pytest.raises(psycopg.Error) as too_big:
        await world.value(append, content, 1, b"x" * (MiB + 1))
    assert {early.value.sqlstate, after_short.value.sqlstate, too_big.value.sqlstate} == {"YV001"}


async def test_a_tree_belongs_to_its_owner_and_kind(world: World, store: PostgresFileStore) -> None:
    assert await store.tree(world.alice, WORKSPACE) == await store.tree(world.alice, WORKSPACE)
    assert await store.tree(world.alice, WORKSPACE) != await store.tree(world.bob, WORKSPACE)
    with pytest.raises(InvalidInput):
        await store.tree(world.alice, WORKDIR, "elsewhere/x")
    with pytest.raises(InvalidInput):
        await store.tree(world.alice, WORKSPACE, "threads/x")
    # an upload of another owner cannot be linked into this tree
    tree = await store.tree(world.alice, WORKSPACE)
    upload = store.upload(world.bob)
    await upload.write(b"bob's")
    with pytest.raises(NotFound):
        await upload.put(tree, "x", media_type="text/plain")
