"""Single-use console login codes (``yuxi.login_code_*``, sql/schema/17_console.sql).

A code is shown once, in a login link; only its SHA-256 is stored. Redeeming it creates
a new API token for its user, so no token is ever kept anywhere but the browser that
redeemed the code."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from yuxi.queue.calls import call_scalar
from yuxi.queue.users import new_token, token_hash

LOGIN_CODE_TTL = timedelta(minutes=15)
LOGIN_TOKEN_NAME = "console login"


def _code_hash(code: str) -> bytes:
    return hashlib.sha256(code.encode()).digest()


async def login_code_create(
    conn: AsyncConnection[Any],
    uid: UUID,
    *,
    now: datetime | None = None,
    ttl: timedelta = LOGIN_CODE_TTL,
) -> str:
    """A new code for the live user ``uid``, valid for ``ttl``; shown once."""
    code = secrets.token_urlsafe(32)
    await call_scalar(
        conn,
        "SELECT yuxi.login_code_create(p_uid => %(uid)s, p_code_hash => %(hash)s,"
        " p_expires_at => coalesce(%(now)s, now()) + %(ttl)s,"
        " p_now => coalesce(%(now)s, now()))",
        {"uid": uid, "hash": _code_hash(code), "now": now, "ttl": ttl},
    )
    return code


async def login_code_redeem(
    conn: AsyncConnection[Any], code: str, *, now: datetime | None = None
) -> tuple[UUID, str] | None:
    """Uses up ``code``: returns (user id, a new API token), or None when the code is
    unknown, used, expired or its user deleted."""
    token = new_token()
    uid = await call_scalar(
        conn,
        "SELECT yuxi.login_code_redeem(p_code_hash => %(hash)s, p_token_hash => %(token)s,"
        " p_token_name => %(name)s, p_now => coalesce(%(now)s, now()))",
        {
            "hash": _code_hash(code),
            "token": token_hash(token),
            "name": LOGIN_TOKEN_NAME,
            "now": now,
        },
    )
    return None if uid is None else (UUID(str(uid)), token)


def login_link(base_url: str, code: str) -> str:
    """The console's address that signs in with ``code``: the code is in the fragment,
    which browsers never send to a server."""
    return f"{base_url.rstrip('/')}/#login={code}"
