"""Searching knowledge bases for the API and for runs: the query is embedded once per
embedding model among the targets, then ``yuxi.kb_search`` fuses full text and vectors
in one call. An embedding endpoint that fails leaves that search to full text (logged,
without the key)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from psycopg_pool import AsyncConnectionPool

from yuxi.agents.services import KnowledgeHit, KnowledgeResult
from yuxi.knowledge.embed import Embedder, EmbeddingError
from yuxi.queue.knowledge import SearchHit, kb_embedding_models, kb_readable, kb_search

log = logging.getLogger("yuxi.knowledge")


async def query_embeddings(models: Sequence[str], query: str) -> dict[str, list[float]]:
    """The query embedded by each model; a model that fails is left out."""
    vectors: dict[str, list[float]] = {}
    for model in models:
        try:
            vectors[model] = await Embedder(model).embed_query(query)
        except EmbeddingError as error:
            log.warning("knowledge search: full text only for %s (%s)", model, error)
    return vectors


async def search(
    pool: AsyncConnectionPool[Any],
    uid: UUID | None,
    kb_ids: Sequence[UUID],
    query: str,
    *,
    k: int = 10,
) -> list[SearchHit]:
    """The best ``k`` chunks of those of ``kb_ids`` that ``uid`` may read."""
    async with pool.connection() as conn:
        models = await kb_embedding_models(conn, kb_ids)
    embeddings = await query_embeddings(models, query) if models and query.strip() else {}
    async with pool.connection() as conn:
        return await kb_search(conn, uid, kb_ids, query, k=k, embeddings=embeddings)


class DatabaseKnowledge:
    """What the ``search_knowledge`` tool calls in a worker (``services().knowledge``):
    checks, where the call executes, which targets the run's user may still read."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self._pool = pool

    async def search(self, uid: str, kb_ids: list[str], query: str, k: int) -> KnowledgeResult:
        user = UUID(uid)
        async with self._pool.connection() as conn:
            readable = {str(kb) for kb in await kb_readable(conn, user)}
        allowed = [UUID(kb) for kb in kb_ids if kb in readable]
        refused = [kb for kb in kb_ids if kb not in readable]
        hits = await search(self._pool, user, allowed, query, k=k) if allowed else []
        return KnowledgeResult(
            [
                KnowledgeHit(
                    str(hit.kb_id),
                    str(hit.document_id),
                    hit.filename,
                    hit.chunk,
                    hit.text,
                    hit.score,
                )
                for hit in hits
            ],
            refused,
        )
