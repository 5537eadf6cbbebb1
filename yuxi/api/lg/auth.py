"""Who calls the LangGraph-compatible API: ``x-api-key: <yuxi token>`` (what the
LangGraph SDK sends) or ``Authorization: Bearer <yuxi token>``."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.exceptions import NotAuthorizedException
from psycopg import AsyncConnection

from yuxi.queue.users import User, token_authenticate


async def lg_caller(
    request: Request[object, object, State], conn: NamedDependency[AsyncConnection[Any]]
) -> User:
    """The ``user`` dependency of /lg: 401 without a valid token in either header."""
    token = request.headers.get("x-api-key", "").strip()
    if not token:
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            token = bearer.strip()
    if not token:
        raise NotAuthorizedException("send x-api-key: <token> or Authorization: Bearer <token>")
    user = await token_authenticate(conn, token)
    if user is None:
        raise NotAuthorizedException("invalid or revoked token")
    request.scope["user"] = user
    return user
