"""Bearer tokens: the caller is the live user whose token hash matches."""

from __future__ import annotations

from uuid import UUID

import msgspec
from litestar import Request
from litestar.datastructures import State
from litestar.exceptions import NotAuthorizedException
from psycopg.rows import kwargs_row

from yuxi.accounts import token_hash
from yuxi.api.errors import Forbidden
from yuxi.api.state import AppState


class User(msgspec.Struct, frozen=True):
    uid: UUID
    name: str
    is_admin: bool


async def authenticate(request: Request[object, object, State]) -> User:
    """The caller, from ``Authorization: Bearer <token>``; 401 without a valid one."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise NotAuthorizedException("send Authorization: Bearer <token>")
    app: AppState = request.app.state.yuxi
    async with app.pool.connection() as conn, conn.cursor(row_factory=kwargs_row(User)) as cur:
        await cur.execute(
            "SELECT uid, name, is_admin FROM yuxi.token_authenticate(%s)",
            (token_hash(token.strip()),),
        )
        found: User | None = await cur.fetchone()
    if found is None:
        raise NotAuthorizedException("invalid or revoked token")
    return found


def require_admin(user: User) -> None:
    if not user.is_admin:
        raise Forbidden("only admins may manage agents")
