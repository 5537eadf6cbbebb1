"""The file store (``yuxi.file_*``, sql/schema/26_file_store.sql): trees of files whose
bytes are chunked contents. yuxi/files/store.py is the interface callers use."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.calls import call_many, call_one, call_scalar

CHUNK_BYTES = 1024 * 1024


class FileInfo(msgspec.Struct, frozen=True):
    """A row of ``yuxi.file_info``: a file of a tree."""

    path: str
    bytes: int
    sha256: str
    media_type: str
    modified_at: datetime
    content_id: int
    chunks: int
    written_by_uid: UUID | None
    written_by_run: UUID | None


class Chunk(msgspec.Struct, frozen=True):
    n: int
    data: bytes


class GcResult(msgspec.Struct, frozen=True):
    contents: int
    bytes: int


async def file_tree(conn: AsyncConnection[Any], owner_uid: UUID, kind: str, root: str = "") -> UUID:
    """The id of the user's tree of ``kind`` at ``root``, created when missing."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.file_tree(p_owner_uid => %(owner)s, p_kind => %(kind)s, p_root => %(root)s)",
        {"owner": owner_uid, "kind": kind, "root": root},
    )
    return UUID(str(value))


async def thread_file_tree(conn: AsyncConnection[Any], uid: UUID, thread_id: UUID) -> UUID:
    """The tree of a live conversation's workdir (NotFound for one the user cannot see)."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.thread_file_tree(p_uid => %(uid)s, p_thread_id => %(thread_id)s)",
        {"uid": uid, "thread_id": thread_id},
    )
    return UUID(str(value))


async def workspace_file_tree(conn: AsyncConnection[Any], uid: UUID) -> UUID:
    """The tree of the user's workspace."""
    value = await call_scalar(
        conn, "SELECT yuxi.workspace_file_tree(p_uid => %(uid)s)", {"uid": uid}
    )
    return UUID(str(value))


async def kb_file_tree(conn: AsyncConnection[Any], kb_id: UUID) -> UUID:
    """The tree of a knowledge base (access is the caller's to check)."""
    value = await call_scalar(conn, "SELECT yuxi.kb_file_tree(p_kb_id => %(kb)s)", {"kb": kb_id})
    return UUID(str(value))


async def file_content_begin(
    conn: AsyncConnection[Any], owner_uid: UUID, *, lease_seconds: float = 300.0
) -> int:
    """Opens a content to add chunks to."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.file_content_begin(p_owner_uid => %(owner)s, p_lease_seconds => %(lease)s)",
        {"owner": owner_uid, "lease": lease_seconds},
    )
    return int(value)


async def file_content_append(
    conn: AsyncConnection[Any],
    content_id: int,
    n: int,
    data: bytes,
    *,
    lease_seconds: float = 300.0,
) -> int:
    """Adds chunk ``n``; the content's bytes so far."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.file_content_append(p_content_id => %(id)s, p_n => %(n)s,"
        " p_data => %(data)s, p_lease_seconds => %(lease)s)",
        {"id": content_id, "n": n, "data": data, "lease": lease_seconds},
    )
    return int(value)


async def file_content_abort(conn: AsyncConnection[Any], content_id: int) -> bool:
    """Removes an unfinished content (a failed upload)."""
    return bool(
        await call_scalar(
            conn, "SELECT yuxi.file_content_abort(p_content_id => %(id)s)", {"id": content_id}
        )
    )


async def file_put(
    conn: AsyncConnection[Any],
    tree_id: UUID,
    path: str,
    content_id: int,
    sha256: str,
    *,
    media_type: str = "application/octet-stream",
    writer_uid: UUID | None = None,
    writer_run: UUID | None = None,
    replaces: str | None = None,
) -> FileInfo:
    """Links a finished upload at ``path`` of the tree, within the store's limits
    (``replaces``: only over the file of that digest, ``""`` for none; FileChanged
    otherwise)."""
    return await call_one(
        conn,
        FileInfo,
        "yuxi.file_put(p_tree_id => %(tree)s, p_path => %(path)s, p_content_id => %(id)s,"
        " p_sha256 => %(sha)s, p_media_type => %(type)s, p_writer_uid => %(uid)s,"
        " p_writer_run => %(run)s, p_replaces => %(replaces)s)",
        {
            "tree": tree_id,
            "path": path,
            "id": content_id,
            "sha": sha256,
            "type": media_type,
            "uid": writer_uid,
            "run": writer_run,
            "replaces": replaces,
        },
    )


async def file_write(
    conn: AsyncConnection[Any],
    tree_id: UUID,
    path: str,
    data: bytes,
    *,
    media_type: str = "application/octet-stream",
    writer_uid: UUID | None = None,
    writer_run: UUID | None = None,
    replaces: str | None = None,
) -> FileInfo:
    """A whole file in one call (``replaces``: as for ``file_put``)."""
    return await call_one(
        conn,
        FileInfo,
        "yuxi.file_write(p_tree_id => %(tree)s, p_path => %(path)s, p_data => %(data)s,"
        " p_media_type => %(type)s, p_writer_uid => %(uid)s, p_writer_run => %(run)s,"
        " p_replaces => %(replaces)s)",
        {
            "tree": tree_id,
            "path": path,
            "data": data,
            "type": media_type,
            "uid": writer_uid,
            "run": writer_run,
            "replaces": replaces,
        },
    )


async def file_delete(
    conn: AsyncConnection[Any], tree_id: UUID, path: str, *, prefix: bool = False
) -> int:
    """Removes a file (``prefix``: and everything under that directory); how many."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.file_delete(p_tree_id => %(tree)s, p_path => %(path)s,"
        " p_prefix => %(prefix)s)",
        {"tree": tree_id, "path": path, "prefix": prefix},
    )
    return int(value)


async def file_tree_drop(conn: AsyncConnection[Any], tree_id: UUID) -> int:
    """Removes a tree and its files."""
    value = await call_scalar(
        conn, "SELECT yuxi.file_tree_drop(p_tree_id => %(tree)s)", {"tree": tree_id}
    )
    return int(value)


async def file_list(conn: AsyncConnection[Any], tree_id: UUID, prefix: str = "") -> list[FileInfo]:
    """The tree's files (under ``prefix``), in path order."""
    return await call_many(
        conn,
        FileInfo,
        "yuxi.file_list(p_tree_id => %(tree)s, p_prefix => %(prefix)s)",
        {"tree": tree_id, "prefix": prefix},
    )


async def file_get(conn: AsyncConnection[Any], tree_id: UUID, path: str) -> FileInfo | None:
    """The file at ``path``, None when there is none."""
    rows = await call_many(
        conn,
        FileInfo,
        "yuxi.file_get(p_tree_id => %(tree)s, p_path => %(path)s)",
        {"tree": tree_id, "path": path},
    )
    return rows[0] if rows else None


async def file_chunks_read(
    conn: AsyncConnection[Any], content_id: int, first: int, last: int
) -> list[Chunk]:
    """Chunks ``first``..``last`` of a content, in order."""
    return await call_many(
        conn,
        Chunk,
        "yuxi.file_chunks_read(p_content_id => %(id)s, p_from => %(first)s, p_to => %(last)s)",
        {"id": content_id, "first": first, "last": last},
        binary=True,  # a chunk's bytes as they are, not hex text of twice their size
    )


async def file_gc(conn: AsyncConnection[Any], *, limit: int = 1000) -> GcResult:
    """Removes contents no file refers to (maintenance)."""
    return await call_one(conn, GcResult, "yuxi.file_gc(p_limit => %(limit)s)", {"limit": limit})
