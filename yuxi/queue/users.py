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

from yuxi.queue.calls import call_many, call_scalar

TOKEN_PREFIX = "yx_"


class User(msgspec.Struct, frozen=True):
    """The live user a token belongs to: who every API call is made as."""

    uid: UUID
    name: str
    is_admin: bool


class UserListing(msgspec.Struct, frozen=True):
    """A row of ``yuxi.user_list()``: no token, no hash."""

    id: UUID
    name: str
    is_admin: bool
    active_tokens: int
    last_used_at: datetime | None
    created_at: datetime


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


async def token_authenticate(conn: AsyncConnection[Any], token: str) -> User | None:
    """The live user holding ``token`` (and marks it used), or None."""
    rows = await call_many(
        conn,
        User,
        "yuxi.token_authenticate(p_token_hash => %(token_hash)s)",
        {"token_hash": token_hash(token)},
    )
    return rows[0] if rows else None
