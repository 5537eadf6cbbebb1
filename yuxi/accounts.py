"""Users and API tokens. A token is shown once; only its SHA-256 is stored."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from yuxi.queue.calls import call_scalar

TOKEN_PREFIX = "yx_"


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


async def create_user(
    conn: AsyncConnection[Any], name: str, *, is_admin: bool = False
) -> tuple[UUID, str]:
    """Creates a user with a first token; returns (user id, token)."""
    token = new_token()
    uid = await call_scalar(
        conn,
        "SELECT yuxi.user_create(%(n)s, %(a)s, %(h)s)",
        {"n": name, "a": is_admin, "h": token_hash(token)},
    )
    return UUID(str(uid)), token
