"""GET /api/system/health — no authentication."""

from __future__ import annotations

import msgspec
from litestar import get
from litestar.datastructures import State

from yuxi.queue.knowledge import kb_vector_status

HEALTH_TIMEOUT_SECONDS = 1.0


class Health(msgspec.Struct, frozen=True, omit_defaults=True):
    status: str
    database: str
    workers: int
    # whether knowledge-base vector search uses pgvector's HNSW indexes, and why not
    # (left out while the database is down)
    vector_indexing: bool | None = None
    vector_search: str | None = None


@get("/api/system/health", tags=["system"], summary="Liveness, database and workers")
async def health(state: State) -> Health:
    """``database`` is ``ok`` when a query succeeds; ``workers`` counts procrastinate
    workers that sent a heartbeat in the last minute; ``vector_indexing`` says whether
    knowledge-base vector search uses pgvector (``vector_search`` says why or why not)."""
    app = state.yuxi
    try:
        # a health check answers at once: it does not queue for the pool's full timeout
        async with app.pool.connection(timeout=HEALTH_TIMEOUT_SECONDS) as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM procrastinate_workers"
                " WHERE last_heartbeat > now() - interval '1 minute'"
            )
            row = await cur.fetchone()
            vectors = await kb_vector_status(conn)
        return Health(
            status="ok",
            database="ok",
            workers=int(row[0]) if row else 0,
            vector_indexing=vectors.vector_indexing,
            vector_search=vectors.detail,
        )
    except Exception:
        return Health(status="degraded", database="down", workers=0)
