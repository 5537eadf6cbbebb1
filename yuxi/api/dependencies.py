"""What handlers are given: the request's database connection and its caller."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from litestar import Request
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.exceptions import NotAuthorizedException
from psycopg import AsyncConnection

from yuxi.api.state import AppState
from yuxi.queue.callers import Bearer, User
from yuxi.queue.users import token_authenticate, token_hash


async def connection(state: State) -> AsyncIterator[AsyncConnection[Any]]:
    """The ``conn`` dependency: one pooled connection per request, returned to the pool
    once the handler's response is built (before a streamed body is sent)."""
    app: AppState = state.yuxi
    async with app.pool.connection() as conn:
        yield conn


async def caller(
    request: Request[object, object, State], conn: NamedDependency[AsyncConnection[Any]]
) -> User:
    """The ``user`` dependency: the live user of ``Authorization: Bearer <token>`` (401
    without a valid one), also kept in the ASGI scope (litestar's ``request.user``) for
    the access log."""
    return await authenticate(request, conn, _bearer(request))


async def caller_briefly(request: Request[object, object, State], state: State) -> User:
    """The ``user`` dependency of a route that waits (for a worker, a run): the token is
    checked on a pooled connection taken for the lookup alone, so that the wait holds
    none and waiting clients cannot starve the pool."""
    token = _bearer(request)
    app: AppState = state.yuxi
    async with app.pool.connection() as conn:
        return await authenticate(request, conn, token)


def bearer_of(request: Request[object, object, State]) -> Bearer:
    """For the routes every run goes through (submit, its event stream, its result): the
    request's token (401 without one), checked by the route's own statement instead of
    one of its own (``yuxi.queue.callers.Bearer``; 401 when no live user holds it). Its
    user is kept in the ASGI scope once checked. Called by the handler, not injected:
    litestar resolves two dependencies of one level (this and ``conn``) in a task group
    of their own, which costs a request more than the token check saves."""
    scope = request.scope

    def keep(user: User) -> None:
        scope["user"] = user

    return Bearer(token_hash(_bearer(request)), keep)


def _bearer(request: Request[object, object, State]) -> str:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise NotAuthorizedException("send Authorization: Bearer <token>")
    return token.strip()


async def authenticate(
    request: Request[object, object, State], conn: AsyncConnection[Any], token: str
) -> User:
    """The live user of ``token`` (401 otherwise), kept in the request's scope."""
    user = await token_authenticate(conn, token)
    if user is None:
        raise NotAuthorizedException("invalid or revoked token")
    request.scope["user"] = user
    return user
