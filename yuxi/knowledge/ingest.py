"""The ingestion job: one attempt at one document. Claim it (``processing``, attempt
n), extract its text, chunk it, embed the chunks when the knowledge base has a model,
then write every chunk and make it ``ready`` in one transaction, so nothing of it is
searchable before it all is. The original is read from the file store by whichever
worker takes the job: text and HTML in memory, PDF and Word spooled to a temporary file
(their readers want one) that is removed once read. A document that cannot be read
fails with the reason; an embedding endpoint that is down or busy is tried again later
(three attempts), then fails. A superseded attempt (another delivery took the
document) writes nothing."""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any
from uuid import UUID

from psycopg_pool import AsyncConnectionPool

from yuxi.db.outages import is_connection_error
from yuxi.files.store import FileStore
from yuxi.knowledge.chunk import Chunk, split_text
from yuxi.knowledge.documents import document_path
from yuxi.knowledge.embed import BATCH, Embedder, EmbeddingError
from yuxi.knowledge.extract import (
    FILE_KINDS,
    ExtractionError,
    document_kind,
    extract_data,
    extract_text,
)
from yuxi.queue.errors import LeaseLost
from yuxi.queue.files import FileInfo
from yuxi.queue.knowledge import (
    IngestTask,
    KbDocument,
    kb_chunks_add,
    kb_document_claim,
    kb_document_fail,
    kb_document_ready,
    kb_vector_index_ensure,
)

log = logging.getLogger("yuxi.knowledge")

MAX_ATTEMPTS = 3
RETRY_SECONDS = 5.0
WRITE_BATCH = 500  # chunks per kb_chunks_add call


class IngestFailure(Exception):
    def __init__(self, message: str, *, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry


async def ingest_document(
    pool: AsyncConnectionPool[Any],
    files: FileStore,
    document_id: UUID,
    *,
    embedder: Callable[[str], Embedder] = Embedder,
) -> KbDocument | None:
    """Ingests the document; returns it as it ended (ready, failed, or queued again),
    or None when there was nothing to do (ingested already, deleted, or superseded)."""
    async with pool.connection() as conn:
        task = await kb_document_claim(conn, document_id)
    if task is None:
        return None
    try:
        try:
            chunks, vectors = await _prepare(files, task, embedder)
            return await _store(pool, task, chunks, vectors)
        except (IngestFailure, LeaseLost):
            raise
        except Exception as error:
            if is_connection_error(error):
                raise  # the stalled-ingestion scan queues it again
            log.exception("document %s: attempt %d failed", task.document_id, task.attempt)
            raise IngestFailure(f"{type(error).__name__}: {error}", retry=True) from None
    except IngestFailure as failure:
        log.warning("document %s: attempt %d failed: %s", task.document_id, task.attempt, failure)
        try:
            async with pool.connection() as conn:
                return await kb_document_fail(
                    conn,
                    task.document_id,
                    task.attempt,
                    str(failure),
                    retry=failure.retry,
                    max_attempts=MAX_ATTEMPTS,
                    delay_seconds=RETRY_SECONDS,
                )
        except LeaseLost:
            return None
    except LeaseLost:
        log.info("document %s: attempt %d was superseded", task.document_id, task.attempt)
        return None


async def _prepare(
    files: FileStore, task: IngestTask, embedder: Callable[[str], Embedder]
) -> tuple[list[Chunk], list[list[float]] | None]:
    try:
        text = await _text(files, task)
    except FileNotFoundError:
        raise IngestFailure(
            f"{task.filename}: the uploaded file is missing; upload it again"
        ) from None
    except ExtractionError as error:
        raise IngestFailure(str(error)) from None
    chunks = await asyncio.to_thread(split_text, text)
    if not chunks:
        raise IngestFailure(f"{task.filename}: no text found in it")
    if not task.embedding_model:
        return chunks, None
    try:
        client = embedder(task.embedding_model)
        vectors: list[list[float]] = []
        for start in range(0, len(chunks), BATCH):
            vectors.extend(await client.embed([c.text for c in chunks[start : start + BATCH]]))
    except EmbeddingError as error:
        raise IngestFailure(str(error), retry=error.transient) from None
    except ValueError as error:  # a malformed model spec
        raise IngestFailure(f"embedding model {task.embedding_model}: {error}") from None
    dims = {len(v) for v in vectors}
    if len(vectors) != len(chunks) or len(dims) != 1 or 0 in dims:
        raise IngestFailure(
            f"embedding with {task.embedding_model} returned {len(vectors)} vectors of sizes"
            f" {sorted(dims)} for {len(chunks)} chunks"
        )
    return chunks, vectors


async def _text(files: FileStore, task: IngestTask) -> str:
    """The original's text, read from the store (FileNotFoundError when it is gone)."""
    kind = document_kind(task.filename, task.media_type)  # before reading any byte
    info = await files.get(await files.kb_tree(task.kb_id), document_path(task.document_id))
    if info is None:
        raise FileNotFoundError(task.filename)
    if kind not in FILE_KINDS:
        data = b"".join([piece async for piece in files.stream(info)])
        return await asyncio.to_thread(extract_data, data, task.filename, task.media_type)
    try:
        spool = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="yuxi-ingest-"))
    except OSError as error:
        raise _spool_failure(task, error) from None
    try:
        path = spool / "original"
        await _spool(files, info, path, task)
        return await asyncio.to_thread(extract_text, path, task.filename, task.media_type)
    finally:
        await asyncio.to_thread(shutil.rmtree, spool, True)


async def _spool(files: FileStore, info: FileInfo, path: Path, task: IngestTask) -> None:
    """Streams the file into ``path``; the store's errors pass, this host's are an
    IngestFailure that names no path."""
    try:
        handle: IO[bytes] = await asyncio.to_thread(path.open, "wb")
    except OSError as error:
        raise _spool_failure(task, error) from None
    try:
        async for piece in files.stream(info):
            try:
                await asyncio.to_thread(handle.write, piece)
            except OSError as error:
                raise _spool_failure(task, error) from None
    finally:
        await asyncio.to_thread(handle.close)


def _spool_failure(task: IngestTask, error: OSError) -> IngestFailure:
    return IngestFailure(
        f"{task.filename}: cannot spool it to a temporary file:"
        f" {error.strerror or type(error).__name__}",
        retry=True,
    )


async def _store(
    pool: AsyncConnectionPool[Any],
    task: IngestTask,
    chunks: list[Chunk],
    vectors: list[list[float]] | None,
) -> KbDocument:
    dims = len(vectors[0]) if vectors else None
    if dims:
        # its own short transaction: building an index while holding chunk inserts
        # could deadlock with another ingestion doing the same
        async with pool.connection() as conn:
            await kb_vector_index_ensure(conn, dims)
    async with pool.connection() as conn, conn.transaction():
        for start in range(0, len(chunks), WRITE_BATCH):
            batch = chunks[start : start + WRITE_BATCH]
            flat = (
                [x for vector in vectors[start : start + WRITE_BATCH] for x in vector]
                if vectors
                else None
            )
            await kb_chunks_add(
                conn,
                task.document_id,
                task.attempt,
                start,
                [c.text for c in batch],
                [c.tokens for c in batch],
                flat,
                dims,
            )
        return await kb_document_ready(conn, task.document_id, task.attempt)
