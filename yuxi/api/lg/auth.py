"""Who calls the LangGraph-compatible API: ``x-api-key: <yuxi token>`` (what the
LangGraph SDK sends) or ``Authorization: Bearer <yuxi token>``."""

from __future__ import annotations

from litestar import Request
from litestar.datastructures import State
from litestar.exceptions import NotAuthorizedException

from yuxi.api.dependencies import authenticate
from yuxi.queue.callers import User


async def lg_caller(request: Request[object, object, State], state: State) -> User:
    """The ``user`` dependency of /lg: 401 without a valid token in either header. It
    takes a pooled connection of its own only for the lookup, so that a route waiting
    for a run's end (join, wait) holds none while it waits."""
    token = request.headers.get("x-api-key", "").strip()
    if not token:
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            token = bearer.strip()
    if not token:
        raise NotAuthorizedException("send x-api-key: <token> or Authorization: Bearer <token>")
    async with state.yuxi.pool.connection() as conn:
        return await authenticate(request, conn, token)
