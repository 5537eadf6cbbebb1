"""The file store: the one interface to every file a user needs (attachments, what agents
write, knowledge-base originals, workspace prompts and memory, personal skills), with
one implementation, PostgreSQL (``PostgresFileStore``, over sql/schema/26_file_store.sql).

A file is a path of a tree: a user's workspace (``WORKSPACE``, root ``""``), a workdir
(``WORKDIR``, root ``threads/<id>`` or ``projects/<dir>``, relative to the workspace) or
a knowledge base (``KNOWLEDGE_BASE``, root its id). Its bytes stream in and out in
1 MiB chunks, never whole in memory: ``upload`` takes pieces as they arrive and links
them at a path once complete (a failure leaves nothing), ``stream`` yields a byte range.

Another implementation (chunks in an S3-compatible object store, rows still here) would
keep this interface; docs/deployment.md says how.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Protocol
from uuid import UUID

from psycopg_pool import AsyncConnectionPool

from yuxi.queue.files import (
    CHUNK_BYTES,
    FileInfo,
    file_chunks_read,
    file_content_abort,
    file_content_append,
    file_content_begin,
    file_delete,
    file_get,
    file_list,
    file_put,
    file_tree,
    file_write,
    kb_file_tree,
    thread_file_tree,
    workspace_file_tree,
)

WORKSPACE = "workspace"
WORKDIR = "workdir"
KNOWLEDGE_BASE = "knowledge_base"

# chunks read per query while streaming: at most this many MiB in memory at once. One:
# libpq keeps each pooled connection's input buffer as large as the largest result it
# received, so four a query grew the API by 18 MiB over a 50 MiB download (one: 8 MiB)
# for no more speed
_READ_CHUNKS = 1


class Upload(Protocol):
    """One file on its way into the store (``async with``: aborted on an exception)."""

    async def __aenter__(self) -> Upload: ...

    async def __aexit__(self, kind: Any, error: Any, traceback: Any) -> None: ...

    @property
    def size(self) -> int: ...

    @property
    def sha256(self) -> str: ...

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        """Adds the next piece."""
        ...

    async def put(
        self,
        tree: UUID,
        path: str,
        *,
        media_type: str,
        writer_uid: UUID | None = None,
        writer_run: UUID | None = None,
        conn: Any = None,
    ) -> FileInfo:
        """Links what was written at ``path`` of ``tree`` (in ``conn``'s transaction when
        given, else in its own)."""
        ...

    async def abort(self) -> None:
        """Gives the upload up: nothing of it stays."""
        ...


class FileStore(Protocol):
    async def tree(self, owner_uid: UUID, kind: str, root: str = "") -> UUID:
        """The owner's tree of ``kind`` at ``root`` (made when missing)."""
        ...

    async def workdir_tree(self, uid: UUID, thread_id: UUID) -> UUID:
        """The tree of a live conversation's workdir (NotFound for another user's)."""
        ...

    async def workspace_tree(self, uid: UUID) -> UUID:
        """The tree of the user's workspace."""
        ...

    async def kb_tree(self, kb_id: UUID) -> UUID:
        """The tree of a knowledge base (its owner's; access is the caller's to check)."""
        ...

    async def write(
        self,
        tree: UUID,
        path: str,
        data: bytes,
        *,
        media_type: str = "application/octet-stream",
        writer_uid: UUID | None = None,
        writer_run: UUID | None = None,
        replaces: str | None = None,
    ) -> FileInfo:
        """A whole file the caller holds in memory, committed before it returns;
        ``replaces``: only over the file of that digest (``""``: only where none is),
        else FileChanged."""
        ...

    def upload(self, owner_uid: UUID) -> Upload:
        """A file streamed in, for a tree of ``owner_uid``."""
        ...

    async def get(self, tree: UUID, path: str) -> FileInfo | None: ...

    async def list(self, tree: UUID, prefix: str = "") -> list[FileInfo]: ...

    def stream(
        self, info: FileInfo, start: int = 0, end: int | None = None
    ) -> AsyncIterator[bytes]:
        """Bytes ``start`` to ``end`` (exclusive; None: the end) of a file."""
        ...

    async def read(self, tree: UUID, path: str, *, limit: int) -> bytes | None:
        """A whole file of at most ``limit`` bytes (None when missing; ValueError when
        larger)."""
        ...

    async def delete(self, tree: UUID, path: str, *, prefix: bool = False) -> int: ...


class PostgresFileStore:
    """The file store in PostgreSQL: every call is one statement on the pool."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self.pool = pool

    async def tree(self, owner_uid: UUID, kind: str, root: str = "") -> UUID:
        async with self.pool.connection() as conn:
            return await file_tree(conn, owner_uid, kind, root)

    async def workdir_tree(self, uid: UUID, thread_id: UUID) -> UUID:
        async with self.pool.connection() as conn:
            return await thread_file_tree(conn, uid, thread_id)

    async def workspace_tree(self, uid: UUID) -> UUID:
        async with self.pool.connection() as conn:
            return await workspace_file_tree(conn, uid)

    async def kb_tree(self, kb_id: UUID) -> UUID:
        async with self.pool.connection() as conn:
            return await kb_file_tree(conn, kb_id)

    async def write(
        self,
        tree: UUID,
        path: str,
        data: bytes,
        *,
        media_type: str = "application/octet-stream",
        writer_uid: UUID | None = None,
        writer_run: UUID | None = None,
        replaces: str | None = None,
    ) -> FileInfo:
        async with self.pool.connection() as conn:
            return await file_write(
                conn,
                tree,
                path,
                data,
                media_type=media_type,
                writer_uid=writer_uid,
                writer_run=writer_run,
                replaces=replaces,
            )

    def upload(self, owner_uid: UUID) -> PostgresUpload:
        return PostgresUpload(self.pool, owner_uid)

    async def get(self, tree: UUID, path: str) -> FileInfo | None:
        async with self.pool.connection() as conn:
            return await file_get(conn, tree, path)

    async def list(self, tree: UUID, prefix: str = "") -> list[FileInfo]:
        async with self.pool.connection() as conn:
            return await file_list(conn, tree, prefix)

    async def stream(
        self, info: FileInfo, start: int = 0, end: int | None = None
    ) -> AsyncIterator[bytes]:
        stop = info.bytes if end is None else min(end, info.bytes)
        if start >= stop:
            return
        first, last = start // CHUNK_BYTES, (stop - 1) // CHUNK_BYTES
        n = first
        while n <= last:
            upto = min(n + _READ_CHUNKS - 1, last)
            async with self.pool.connection() as conn:
                chunks = await file_chunks_read(conn, info.content_id, n, upto)
            if len(chunks) != upto - n + 1:
                raise FileNotFoundError(f"{info.path} changed while it was read")
            for chunk in chunks:
                offset = chunk.n * CHUNK_BYTES
                yield chunk.data[max(start - offset, 0) : stop - offset]
            n = upto + 1

    async def read(self, tree: UUID, path: str, *, limit: int) -> bytes | None:
        info = await self.get(tree, path)
        if info is None:
            return None
        if info.bytes > limit:
            raise ValueError(f"{path} is {info.bytes} bytes, more than {limit}")
        return b"".join([piece async for piece in self.stream(info)])

    async def delete(self, tree: UUID, path: str, *, prefix: bool = False) -> int:
        async with self.pool.connection() as conn:
            return await file_delete(conn, tree, path, prefix=prefix)


class PostgresUpload:
    """A file streamed into PostgreSQL a chunk at a time: each full chunk is committed
    as it comes (the writer's lease extended), so an upload of any size holds one chunk
    in memory and no transaction open; ``put`` links it, ``abort`` (or an exception in
    ``async with``) removes what was sent."""

    def __init__(self, pool: AsyncConnectionPool[Any], owner_uid: UUID) -> None:
        self._pool = pool
        self._owner = owner_uid
        self._content: int | None = None
        self._chunks = 0
        self._buffer = bytearray()
        self._digest = hashlib.sha256()
        self.size = 0

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

    async def __aenter__(self) -> PostgresUpload:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is not None:
            await self.abort()

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        self.size += len(data)
        self._digest.update(data)
        self._buffer += data
        while len(self._buffer) >= CHUNK_BYTES:
            await self._send(bytes(self._buffer[:CHUNK_BYTES]))
            del self._buffer[:CHUNK_BYTES]

    async def put(
        self,
        tree: UUID,
        path: str,
        *,
        media_type: str,
        writer_uid: UUID | None = None,
        writer_run: UUID | None = None,
        conn: Any = None,
    ) -> FileInfo:
        if self._buffer:
            await self._send(bytes(self._buffer))
            self._buffer.clear()
        content = await self._begun()
        if conn is not None:
            return await file_put(
                conn,
                tree,
                path,
                content,
                self.sha256,
                media_type=media_type,
                writer_uid=writer_uid,
                writer_run=writer_run,
            )
        async with self._pool.connection() as own:
            return await file_put(
                own,
                tree,
                path,
                content,
                self.sha256,
                media_type=media_type,
                writer_uid=writer_uid,
                writer_run=writer_run,
            )

    async def abort(self) -> None:
        content, self._content = self._content, None
        self._buffer.clear()
        if content is not None:
            async with self._pool.connection() as conn:
                await file_content_abort(conn, content)

    async def _begun(self) -> int:
        if self._content is None:
            async with self._pool.connection() as conn:
                self._content = await file_content_begin(conn, self._owner)
        return self._content

    async def _send(self, chunk: bytes) -> None:
        content = await self._begun()
        async with self._pool.connection() as conn:
            await file_content_append(conn, content, self._chunks, chunk)
        self._chunks += 1
