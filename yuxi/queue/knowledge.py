"""Knowledge bases (``yuxi.kb_*``): the bases and who may read them, their documents,
the ingestion steps a worker takes, and the hybrid search. Extracting, chunking and
embedding are the runtime's (yuxi/knowledge/); these only call SQL."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.calls import call_many, call_one, call_scalar, encode_json
from yuxi.queue.errors import NotFound, typed_errors

ShareScope = Literal["owner", "selected", "all"]
DocumentStatus = Literal["queued", "processing", "ready", "failed"]


class KnowledgeBase(msgspec.Struct, frozen=True):
    """A row of ``yuxi.kb_info``."""

    id: UUID
    uid: UUID
    owner_name: str | None
    slug: str
    name: str
    description: str
    embedding_model: str | None
    share_scope: str
    shared_with: list[UUID]
    documents: int
    ready_documents: int
    chunks: int
    created_at: datetime
    updated_at: datetime


class KbDocument(msgspec.Struct, frozen=True):
    """A row of ``yuxi.kb_document_info``: ``created`` is false when an upload found the
    same content already there."""

    id: UUID
    kb_id: UUID
    filename: str
    media_type: str
    bytes: int
    sha256: str
    status: str
    chunks: int
    error: str | None
    attempts: int
    created_at: datetime
    updated_at: datetime
    ready_at: datetime | None
    created: bool


class IngestTask(msgspec.Struct, frozen=True):
    """A row of ``yuxi.kb_document_claim``: the attempt a worker holds."""

    document_id: UUID
    kb_id: UUID
    filename: str
    media_type: str
    sha256: str
    attempt: int
    embedding_model: str | None


class SearchHit(msgspec.Struct, frozen=True):
    """A row of ``yuxi.kb_search``; ``text_rank``/``vector_rank`` are the chunk's ranks
    in the lists fused (None where it was not among the best)."""

    kb_id: UUID
    document_id: UUID
    filename: str
    chunk: int
    text: str
    score: float
    text_rank: int | None
    vector_rank: int | None


class StalledDocument(msgspec.Struct, frozen=True):
    """A row of ``yuxi.kb_document_redeliver_stalled``."""

    document_id: UUID
    status: str
    job_id: int | None


class VectorStatus(msgspec.Struct, frozen=True):
    """The row of ``yuxi.kb_vector_status``."""

    vector_indexing: bool
    pgvector_version: str | None
    detail: str


# -- knowledge bases ------------------------------------------------------------------


async def kb_create(
    conn: AsyncConnection[Any],
    uid: UUID,
    *,
    name: str,
    description: str = "",
    embedding_model: str | None = None,
    share_scope: str = "owner",
    shared_with: Sequence[UUID] = (),
    slug: str | None = None,
) -> KnowledgeBase:
    return await call_one(
        conn,
        KnowledgeBase,
        "yuxi.kb_create(p_uid => %(uid)s, p_name => %(name)s, p_description => %(description)s,"
        " p_embedding_model => %(model)s, p_share_scope => %(scope)s,"
        " p_shared_with => %(shared)s::uuid[], p_slug => %(slug)s)",
        {
            "uid": uid,
            "name": name,
            "description": description,
            "model": embedding_model,
            "scope": share_scope,
            "shared": list(shared_with),
            "slug": slug,
        },
    )


async def kb_update(
    conn: AsyncConnection[Any],
    uid: UUID | None,
    kb_id: UUID,
    *,
    name: str | None = None,
    description: str | None = None,
    share_scope: str | None = None,
    shared_with: Sequence[UUID] | None = None,
) -> KnowledgeBase:
    return await call_one(
        conn,
        KnowledgeBase,
        "yuxi.kb_update(p_uid => %(uid)s, p_kb_id => %(kb)s, p_name => %(name)s,"
        " p_description => %(description)s, p_share_scope => %(scope)s,"
        " p_shared_with => %(shared)s::uuid[])",
        {
            "uid": uid,
            "kb": kb_id,
            "name": name,
            "description": description,
            "scope": share_scope,
            "shared": None if shared_with is None else list(shared_with),
        },
    )


async def kb_get(conn: AsyncConnection[Any], uid: UUID | None, kb_id: UUID) -> KnowledgeBase:
    return await call_one(
        conn,
        KnowledgeBase,
        "yuxi.kb_get(p_uid => %(uid)s, p_kb_id => %(kb)s)",
        {"uid": uid, "kb": kb_id},
    )


async def kb_list(conn: AsyncConnection[Any], uid: UUID | None) -> list[KnowledgeBase]:
    return await call_many(conn, KnowledgeBase, "yuxi.kb_list(p_uid => %(uid)s)", {"uid": uid})


async def kb_delete(conn: AsyncConnection[Any], uid: UUID | None, kb_id: UUID) -> list[UUID]:
    """Deletes the knowledge base; returns its documents' ids (their files go next)."""
    async with conn.cursor() as cur:
        with typed_errors():
            await cur.execute(
                "SELECT yuxi.kb_delete(p_uid => %(uid)s, p_kb_id => %(kb)s)",
                {"uid": uid, "kb": kb_id},
            )
            return [row[0] for row in await cur.fetchall()]


async def kb_readable(conn: AsyncConnection[Any], uid: UUID) -> list[UUID]:
    """The ids of the knowledge bases the user may read, in a stable order."""
    cur = await conn.execute("SELECT yuxi.kb_readable(%s)", (uid,))
    return [row[0] for row in await cur.fetchall()]


async def kb_vector_status(conn: AsyncConnection[Any]) -> VectorStatus:
    """Whether vector search uses pgvector's HNSW indexes or an exact scan, and why."""
    return await call_one(conn, VectorStatus, "yuxi.kb_vector_status()", {})


# -- documents ------------------------------------------------------------------------


async def kb_document_add(
    conn: AsyncConnection[Any],
    uid: UUID | None,
    kb_id: UUID,
    *,
    filename: str,
    size: int,
    sha256: str,
    media_type: str,
) -> KbDocument:
    """Records an upload as queued with its ingestion job (in the caller's transaction)."""
    return await call_one(
        conn,
        KbDocument,
        "yuxi.kb_document_add(p_uid => %(uid)s, p_kb_id => %(kb)s, p_filename => %(filename)s,"
        " p_bytes => %(bytes)s, p_sha256 => %(sha256)s, p_media_type => %(media_type)s)",
        {
            "uid": uid,
            "kb": kb_id,
            "filename": filename,
            "bytes": size,
            "sha256": sha256,
            "media_type": media_type,
        },
    )


async def kb_document_list(
    conn: AsyncConnection[Any], uid: UUID | None, kb_id: UUID
) -> list[KbDocument]:
    return await call_many(
        conn,
        KbDocument,
        "yuxi.kb_document_list(p_uid => %(uid)s, p_kb_id => %(kb)s)",
        {"uid": uid, "kb": kb_id},
    )


async def kb_document_get(
    conn: AsyncConnection[Any], uid: UUID | None, kb_id: UUID, document_id: UUID
) -> KbDocument:
    return await call_one(
        conn,
        KbDocument,
        "yuxi.kb_document_get(p_uid => %(uid)s, p_kb_id => %(kb)s, p_id => %(id)s)",
        {"uid": uid, "kb": kb_id, "id": document_id},
    )


async def kb_document_delete(
    conn: AsyncConnection[Any], uid: UUID | None, kb_id: UUID, document_id: UUID
) -> None:
    await call_scalar(
        conn,
        "SELECT yuxi.kb_document_delete(p_uid => %(uid)s, p_kb_id => %(kb)s, p_id => %(id)s)",
        {"uid": uid, "kb": kb_id, "id": document_id},
    )


# -- ingestion ------------------------------------------------------------------------


async def kb_document_claim(conn: AsyncConnection[Any], document_id: UUID) -> IngestTask | None:
    """A new attempt at the document, or None when there is nothing to ingest."""
    rows = await call_many(
        conn, IngestTask, "yuxi.kb_document_claim(p_id => %(id)s)", {"id": document_id}
    )
    return rows[0] if rows else None


async def kb_vector_index_ensure(conn: AsyncConnection[Any], dims: int) -> str | None:
    value = await call_scalar(conn, "SELECT yuxi.kb_vector_index_ensure(%(dims)s)", {"dims": dims})
    return None if value is None else str(value)


async def kb_chunks_add(
    conn: AsyncConnection[Any],
    document_id: UUID,
    attempt: int,
    first_seq: int,
    texts: Sequence[str],
    tokens: Sequence[int],
    embeddings: Sequence[float] | None = None,
    dims: int | None = None,
) -> int:
    """Adds chunks under the attempt; ``embeddings`` flattened, ``dims`` per chunk."""
    return int(
        await call_scalar(
            conn,
            "SELECT yuxi.kb_chunks_add(p_id => %(id)s, p_attempt => %(attempt)s,"
            " p_first_seq => %(first)s, p_texts => %(texts)s::text[],"
            " p_tokens => %(tokens)s::integer[], p_embeddings => %(embeddings)s::real[],"
            " p_dims => %(dims)s)",
            {
                "id": document_id,
                "attempt": attempt,
                "first": first_seq,
                "texts": list(texts),
                "tokens": list(tokens),
                "embeddings": None if embeddings is None else list(embeddings),
                "dims": dims,
            },
        )
    )


async def kb_document_ready(
    conn: AsyncConnection[Any], document_id: UUID, attempt: int
) -> KbDocument:
    return await call_one(
        conn,
        KbDocument,
        "yuxi.kb_document_ready(p_id => %(id)s, p_attempt => %(attempt)s)",
        {"id": document_id, "attempt": attempt},
    )


async def kb_document_fail(
    conn: AsyncConnection[Any],
    document_id: UUID,
    attempt: int,
    error: str,
    *,
    retry: bool = False,
    max_attempts: int = 3,
    delay_seconds: float = 5.0,
) -> KbDocument:
    return await call_one(
        conn,
        KbDocument,
        "yuxi.kb_document_fail(p_id => %(id)s, p_attempt => %(attempt)s, p_error => %(error)s,"
        " p_retry => %(retry)s, p_max_attempts => %(max)s, p_delay_seconds => %(delay)s)",
        {
            "id": document_id,
            "attempt": attempt,
            "error": error,
            "retry": retry,
            "max": max_attempts,
            "delay": delay_seconds,
        },
    )


async def kb_document_redeliver_stalled(
    conn: AsyncConnection[Any], *, stalled_seconds: float = 30.0, max_attempts: int = 3
) -> list[StalledDocument]:
    return await call_many(
        conn,
        StalledDocument,
        "yuxi.kb_document_redeliver_stalled(p_stalled_seconds => %(stalled)s,"
        " p_max_attempts => %(max)s)",
        {"stalled": stalled_seconds, "max": max_attempts},
    )


# -- search ---------------------------------------------------------------------------


async def kb_embedding_models(conn: AsyncConnection[Any], kb_ids: Sequence[UUID]) -> list[str]:
    """The embedding models of ``kb_ids``, each once, by name (a search embeds its query
    with each); no access check."""
    cur = await conn.execute(
        "SELECT embedding_model FROM yuxi.kb_embedding_models(p_kb_ids => %(kb_ids)s::uuid[])",
        {"kb_ids": list(kb_ids)},
    )
    return [str(row[0]) for row in await cur.fetchall()]


async def kb_search(
    conn: AsyncConnection[Any],
    uid: UUID | None,
    kb_ids: Sequence[UUID] | None,
    query: str,
    *,
    k: int = 10,
    embeddings: dict[str, list[float]] | None = None,
) -> list[SearchHit]:
    """The best ``k`` chunks of the readable knowledge bases among ``kb_ids`` (None: all
    the user may read); ``embeddings`` maps an embedding model to the query's vector."""
    return await call_many(
        conn,
        SearchHit,
        "yuxi.kb_search(p_uid => %(uid)s, p_kb_ids => %(kbs)s::uuid[], p_query => %(query)s,"
        " p_k => %(k)s, p_embeddings => %(embeddings)s::jsonb)",
        {
            "uid": uid,
            "kbs": None if kb_ids is None else list(kb_ids),
            "query": query,
            "k": k,
            "embeddings": encode_json(embeddings) if embeddings else None,
        },
    )


# -- request bodies -------------------------------------------------------------------


class NewKnowledgeBase(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /api/knowledge-bases``."""

    name: str
    description: str = ""
    embedding_model: str | None = None
    share_scope: ShareScope = "owner"
    shared_with: list[UUID] = msgspec.field(default_factory=list)
    slug: str | None = None


class KnowledgeBasePatch(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``PATCH /api/knowledge-bases/{id}``: fields left out keep their value."""

    name: str | None = None
    description: str | None = None
    share_scope: ShareScope | None = None
    shared_with: list[UUID] | None = None
    embedding_model: str | None = None


class SearchRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /api/knowledge-bases/{id}/search``."""

    query: str
    k: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10


class SearchResults(msgspec.Struct, frozen=True):
    results: list[SearchHit]


async def kb_check_write(conn: AsyncConnection[Any], uid: UUID | None, kb_id: UUID) -> None:
    """NotFound unless the user may read the knowledge base, ReadOnly unless they own it."""
    await call_scalar(
        conn,
        "SELECT (yuxi.kb_access(p_uid => %(uid)s, p_kb_id => %(kb)s, p_write => true)).id",
        {"uid": uid, "kb": kb_id},
    )


async def kb_find(conn: AsyncConnection[Any], reference: str) -> UUID:
    """A knowledge base by ``<id>`` or ``<owner name>/<slug>`` (operators' shorthand);
    NotFound when there is none."""
    owner, slash, slug = reference.partition("/")
    if slash:
        cur = await conn.execute(
            "SELECT k.id FROM yuxi.knowledge_bases k JOIN yuxi.users u ON u.id = k.uid"
            " WHERE u.name = %s AND u.deleted_at IS NULL AND k.slug = %s",
            (owner, slug),
        )
    else:
        try:
            kb_id = UUID(reference)
        except ValueError:
            raise NotFound(f"knowledge base {reference}: give its id or OWNER/SLUG") from None
        cur = await conn.execute("SELECT id FROM yuxi.knowledge_bases WHERE id = %s", (kb_id,))
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"knowledge base {reference} not found")
    return UUID(str(row[0]))
