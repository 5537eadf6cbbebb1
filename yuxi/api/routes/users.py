"""Users and their tokens, for admins: list users, delete one, list and revoke tokens."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import msgspec
from litestar import Controller, delete, get
from litestar.di import NamedDependency
from litestar.params import FromPath
from psycopg import AsyncConnection

from yuxi.api.auth import User, require_admin
from yuxi.api.errors import Forbidden
from yuxi.queue.users import (
    Token,
    UserListing,
    token_list,
    token_revoke,
    user_delete,
    user_list,
)

Conn = NamedDependency[AsyncConnection[Any]]


class Revoked(msgspec.Struct, frozen=True):
    revoked: int


class UsersController(Controller):
    path = "/api/users"
    tags = ("users",)

    @get("/", summary="Live users with their number of active tokens (admins)")
    async def list_users(self, conn: Conn, user: NamedDependency[User]) -> list[UserListing]:
        require_admin(user, "manage users")
        return await user_list(conn)

    @delete("/{uid:uuid}", summary="Delete a user: tokens revoked, scheduled jobs removed (admins)")
    async def remove(self, conn: Conn, user: NamedDependency[User], uid: FromPath[UUID]) -> None:
        require_admin(user, "manage users")
        if uid == user.uid:
            raise Forbidden("you cannot delete yourself")
        await user_delete(conn, uid)

    @get("/{uid:uuid}/tokens", summary="A user's tokens, newest first; never the tokens (admins)")
    async def tokens(
        self, conn: Conn, user: NamedDependency[User], uid: FromPath[UUID]
    ) -> list[Token]:
        require_admin(user, "manage users")
        return await token_list(conn, uid)

    @delete(
        "/{uid:uuid}/tokens",
        status_code=200,
        summary="Revoke every active token of a user (admins)",
    )
    async def revoke_all(
        self, conn: Conn, user: NamedDependency[User], uid: FromPath[UUID]
    ) -> Revoked:
        require_admin(user, "manage users")
        return Revoked(await token_revoke(conn, uid))

    @delete(
        "/{uid:uuid}/tokens/{token_id:uuid}",
        status_code=200,
        summary="Revoke one token of a user (admins)",
    )
    async def revoke_one(
        self,
        conn: Conn,
        user: NamedDependency[User],
        uid: FromPath[UUID],
        token_id: FromPath[UUID],
    ) -> Revoked:
        require_admin(user, "manage users")
        return Revoked(await token_revoke(conn, uid, token_id))
