"""Users and API tokens (``yuxi.user_*``, ``yuxi.token_*``). A token is shown once;
only its SHA-256 is stored."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.callers import Bearer, User
from yuxi.queue.calls import call_many, call_scalar
from yuxi.queue.errors import Unauthenticated

TOKEN_PREFIX = "yx_"


class UserListing(msgspec.Struct, frozen=True):
    """A row of ``yuxi.user_list()``: no token, no hash."""

    id: UUID
    name: str
    is_admin: bool
    active_tokens: int
    last_used_at: datetime | None
    created_at: datetime


class Token(msgspec.Struct, frozen=True):
    """A row of ``yuxi.token_list``: never the token or its hash."""

    id: UUID
    name: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


async def user_create(
    conn: AsyncConnection[Any], name: str, *, is_admin: bool = False
) -> tuple[UUID, str]:
    """Creates a user with a first token; returns (user id, token)."""
    token = new_token()
    uid = await call_scalar(
        conn,
        "SELECT yuxi.user_create(p_name => %(name)s, p_is_admin => %(is_admin)s,"
        " p_token_hash => %(token_hash)s)",
        {"name": name, "is_admin": is_admin, "token_hash": token_hash(token)},
    )
    return UUID(str(uid)), token


async def user_seed_admin(conn: AsyncConnection[Any], name: str) -> str | None:
    """Creates admin ``name`` unless a live admin exists; returns its token (None when
    there already is an admin)."""
    token = new_token()
    uid = await call_scalar(
        conn,
        "SELECT yuxi.user_seed_admin(p_name => %(name)s, p_token_hash => %(token_hash)s)",
        {"name": name, "token_hash": token_hash(token)},
    )
    return None if uid is None else token


async def user_list(conn: AsyncConnection[Any]) -> list[UserListing]:
    """Live users by name, with their count of unrevoked tokens."""
    return await call_many(conn, UserListing, "yuxi.user_list()", {})


async def user_by_name(conn: AsyncConnection[Any], name: str) -> UUID:
    """The id of the live user named ``name`` (``NotFound`` when there is none)."""
    uid = await call_scalar(conn, "SELECT yuxi.user_by_name(p_name => %(name)s)", {"name": name})
    return UUID(str(uid))


async def token_authenticate(conn: AsyncConnection[Any], token: str) -> User | None:
    """The live user holding ``token`` (and marks it used), or None."""
    return await _authenticate(conn, token_hash(token))


async def bearer_user(conn: AsyncConnection[Any], bearer: Bearer) -> User:
    """The live user of ``bearer``, checked by a statement of its own (for a request
    that needs its user before its first call); raises Unauthenticated."""
    if bearer.user is not None:
        return bearer.user
    user = await _authenticate(conn, bearer.token_hash)
    if user is None:
        raise Unauthenticated("invalid or revoked token")
    return bearer.checked(user)


async def _authenticate(conn: AsyncConnection[Any], hashed: bytes) -> User | None:
    rows = await call_many(
        conn,
        User,
        "yuxi.token_authenticate(p_token_hash => %(token_hash)s)",
        {"token_hash": hashed},
    )
    return rows[0] if rows else None


async def user_delete(conn: AsyncConnection[Any], uid: UUID) -> None:
    """Soft-deletes the user, revokes its tokens, removes its scheduled jobs."""
    await call_scalar(conn, "SELECT yuxi.user_delete(p_uid => %(uid)s)", {"uid": uid})


async def token_create(conn: AsyncConnection[Any], uid: UUID, *, name: str = "default") -> str:
    """A new API token for a live user; returns the token (only its hash is stored)."""
    token = new_token()
    await call_scalar(
        conn,
        "SELECT yuxi.token_create(p_uid => %(uid)s, p_token_hash => %(token_hash)s,"
        " p_name => %(name)s)",
        {"uid": uid, "token_hash": token_hash(token), "name": name},
    )
    return token


async def token_list(conn: AsyncConnection[Any], uid: UUID) -> list[Token]:
    """The user's tokens, newest first, revoked ones included."""
    return await call_many(conn, Token, "yuxi.token_list(p_uid => %(uid)s)", {"uid": uid})


async def token_revoke(conn: AsyncConnection[Any], uid: UUID, token_id: UUID | None = None) -> int:
    """Revokes one of the user's tokens, or all still active (``token_id`` None);
    returns how many were revoked."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.token_revoke(p_uid => %(uid)s, p_token_id => %(token_id)s)",
        {"uid": uid, "token_id": token_id},
    )
    return int(value)
