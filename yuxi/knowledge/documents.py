"""Where knowledge-base documents live: in the file store, each original at path
``<document_id>`` of its knowledge base's tree (``yuxi.kb_file_tree``, its owner's),
kept for re-ingestion. An upload streams into the store as it arrives (a
``ReceivedFile`` of yuxi/files/attachments.py: never whole in memory), then one
transaction records each document (``yuxi.kb_document_add``, which also defers its
ingestion job) and links its bytes into place (``Upload.put(..., conn=conn)``); if
anything fails, nothing of the upload stays. Deleting a document removes its file,
deleting a knowledge base drops its tree, in the same transaction as the rows (the SQL
does both). Paths are never shown to clients: documents are named by their ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import psycopg
from psycopg_pool import AsyncConnectionPool

from yuxi.files.attachments import ReceivedFile
from yuxi.queue.errors import NotFound
from yuxi.queue.files import file_get, kb_file_tree
from yuxi.queue.knowledge import KbDocument, kb_delete, kb_document_add, kb_document_delete


def document_path(document_id: UUID) -> str:
    """The path of a document's original in its knowledge base's file tree."""
    return str(document_id)


async def commit_documents(
    pool: AsyncConnectionPool[Any],
    uid: UUID | None,
    kb_id: UUID,
    files: Sequence[ReceivedFile],
) -> list[KbDocument]:
    """Records every uploaded file as a queued document with its ingestion job and links
    its bytes at ``<document id>`` of the knowledge base's tree, in one transaction; the
    same content already there is returned as it is (``created`` false). Whatever
    happens, the uploads are aborted afterwards but for those this commit linked: a
    failure leaves nothing."""
    committed = False
    try:
        async with pool.connection() as conn:
            async with conn.transaction():
                rows: dict[int, KbDocument] = {}
                # every document first, in digest order, then their files: two requests
                # holding the same bytes in another order, or a writer of the tree, never
                # wait for each other in a cycle (document rows, then the tree's lock)
                for n in sorted(range(len(files)), key=lambda i: files[i].sha256):
                    item = files[n]
                    rows[n] = await kb_document_add(
                        conn,
                        uid,
                        kb_id,
                        filename=item.filename,
                        size=item.size,
                        sha256=item.sha256,
                        media_type=item.media_type,
                    )
                # the documents' rows hold the knowledge base against a delete until this
                # commits, so the tree cannot outlive it
                tree = await kb_file_tree(conn, kb_id) if files else None
                for n, item in enumerate(files):
                    row, path = rows[n], document_path(rows[n].id)
                    assert tree is not None
                    held = await file_get(conn, tree, path)
                    if held is None or held.sha256 != row.sha256:
                        await item.upload.put(
                            tree, path, media_type=row.media_type, writer_uid=uid, conn=conn
                        )
                        item.linked = True
            committed = True
            return [rows[n] for n in range(len(files))]
    except psycopg.errors.ForeignKeyViolation:
        # the knowledge base was deleted while this upload went on (its row gone before
        # this commit): nothing of the upload stays
        raise NotFound(f"knowledge base {kb_id} was deleted during the upload") from None
    finally:
        for item in files:
            if not (committed and item.linked):
                await item.discard()


async def remove_document(
    pool: AsyncConnectionPool[Any], uid: UUID | None, kb_id: UUID, document_id: UUID
) -> None:
    """Deletes the document, its chunks and its file, in one transaction."""
    async with pool.connection() as conn:
        await kb_document_delete(conn, uid, kb_id, document_id)


async def remove_knowledge_base(
    pool: AsyncConnectionPool[Any], uid: UUID | None, kb_id: UUID
) -> None:
    """Deletes the knowledge base with its documents, chunks and file tree, in one
    transaction."""
    async with pool.connection() as conn:
        await kb_delete(conn, uid, kb_id)
