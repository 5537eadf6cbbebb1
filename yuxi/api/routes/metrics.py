"""GET /metrics — Prometheus metrics; no authentication, like /api/system/health (keep
it off the public network: docs/operations.md#metrics)."""

from __future__ import annotations

from litestar import Response, get
from litestar.datastructures import State

from yuxi.api.metrics import CONTENT_TYPE, metrics_text


@get("/metrics", tags=["system"], summary="Prometheus metrics", media_type=CONTENT_TYPE)
async def metrics(state: State) -> Response[bytes]:
    """This process's HTTP metrics (and a worker's, when one runs in this process), then
    the database's, read at this scrape (the same from every API process)."""
    return Response(await metrics_text(state.yuxi.pool), media_type=CONTENT_TYPE)
