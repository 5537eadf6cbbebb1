"""Where knowledge-base documents live: ``<YUXI_HOME>/knowledge/<kb_id>/<document_id>``
(the original bytes, kept for re-ingestion). An upload streams into a staging file of
that directory (yuxi/api/uploads.py, never in memory), then one transaction records it
(``yuxi.kb_document_add``, which also defers its ingestion job) and links the file into
place before committing; if anything fails the file is removed again. Paths are never
shown to clients: documents are named by their ids."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
from psycopg_pool import AsyncConnectionPool

from yuxi.files.attachments import StagedFile
from yuxi.files.layout import document_path, kb_directory
from yuxi.queue.errors import NotFound
from yuxi.queue.knowledge import KbDocument, kb_delete, kb_document_add, kb_document_delete


def staging_directory(home: Path, kb_id: UUID) -> Path:
    """The knowledge base's directory, created when missing (uploads stage here)."""
    directory = kb_directory(home, kb_id)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


async def commit_documents(
    pool: AsyncConnectionPool[Any],
    home: Path,
    uid: UUID | None,
    kb_id: UUID,
    files: list[StagedFile],
) -> list[KbDocument]:
    """Records every staged file as a queued document with its ingestion job, in one
    transaction; the same content already there is returned as it is (``created``
    false). Staging files are removed whatever happens."""
    placed: list[Path] = []
    try:
        async with pool.connection() as conn, conn.transaction():
            rows = []
            for staged in files:
                row = await kb_document_add(
                    conn,
                    uid,
                    kb_id,
                    filename=staged.filename,
                    size=staged.size,
                    sha256=staged.sha256,
                    media_type=staged.media_type,
                )
                final = document_path(home, kb_id, row.id)
                if row.created or not await asyncio.to_thread(final.exists):
                    await asyncio.to_thread(_place, staged.path, final)
                    placed.append(final)
                rows.append(row)
            return rows
    except (FileNotFoundError, psycopg.errors.ForeignKeyViolation):
        # the knowledge base was deleted while this upload went on (its directory
        # removed, or its row gone before this commit): nothing of the upload stays
        for path in placed:
            with contextlib.suppress(OSError):
                path.unlink()
        raise NotFound(f"knowledge base {kb_id} was deleted during the upload") from None
    except BaseException:
        for path in placed:
            with contextlib.suppress(OSError):
                path.unlink()
        raise
    finally:
        for staged in files:
            await staged.discard()


def _place(staged: Path, final: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        final.unlink()  # a file left by a rolled-back upload under a reused id
    os.link(staged, final)


async def remove_document(
    pool: AsyncConnectionPool[Any], home: Path, uid: UUID | None, kb_id: UUID, document_id: UUID
) -> None:
    """Deletes the document and its chunks, then (once that committed) its file."""
    async with pool.connection() as conn:
        await kb_document_delete(conn, uid, kb_id, document_id)
    with contextlib.suppress(OSError):
        await asyncio.to_thread(document_path(home, kb_id, document_id).unlink)


async def remove_knowledge_base(
    pool: AsyncConnectionPool[Any], home: Path, uid: UUID | None, kb_id: UUID
) -> None:
    """Deletes the knowledge base with its documents and chunks, then its directory."""
    async with pool.connection() as conn:
        await kb_delete(conn, uid, kb_id)
    await asyncio.to_thread(shutil.rmtree, kb_directory(home, kb_id), True)
