"""The web console: ``GET /`` (its page), ``/console/...`` (its ES modules, styles and
vendored libraries, from ``yuxi/api/console/``), ``POST /api/console/login`` (a login
link's code exchanged for a token) and ``GET /api/me`` (who the token belongs to).

Every console response carries a strict Content-Security-Policy: scripts, styles and
connections from this origin only, no inline script, no framing (docs/console.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID

import msgspec
from litestar import Response, get, post
from litestar.datastructures import CacheControlHeader
from litestar.di import NamedDependency
from litestar.exceptions import NotAuthorizedException
from litestar.params import JSONBody
from litestar.router import Router
from litestar.static_files import create_static_files_router
from psycopg import AsyncConnection

from yuxi.api.bodies import Body
from yuxi.queue.callers import User
from yuxi.queue.login_codes import login_code_redeem
from yuxi.queue.users import token_authenticate

Conn = NamedDependency[AsyncConnection[Any]]

CONSOLE_DIR = Path(__file__).resolve().parent.parent / "console"

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
# the console's files change with yuxi: the browser revalidates them (ETag) every time
_REVALIDATE = CacheControlHeader(no_cache=True)


class LoginCode(Body):
    code: str


class Me(msgspec.Struct, frozen=True):
    id: UUID
    name: str
    is_admin: bool


class LoginResult(msgspec.Struct, frozen=True):
    token: str
    user: Me


async def _secure(response: Response[Any]) -> Response[Any]:
    response.headers.update(SECURITY_HEADERS)
    return response


@get("/", include_in_schema=False, cache_control=_REVALIDATE, after_request=_secure)
async def console_page() -> Response[bytes]:
    """The console's one page; everything else it loads from /console/."""
    return Response((CONSOLE_DIR / "index.html").read_bytes(), media_type="text/html")


def console_files() -> Router:
    """The console's static files under /console/."""
    return create_static_files_router(
        path="/console",
        directories=[CONSOLE_DIR],
        name="console",
        cache_control=_REVALIDATE,
        after_request=_secure,
        include_in_schema=False,
    )


@post(
    "/api/console/login",
    status_code=200,
    tags=["console"],
    summary="Exchange a login link's code for a token",
)
async def console_login(conn: Conn, data: JSONBody[LoginCode]) -> LoginResult:
    """A single-use code from ``yuxi up`` or ``yuxi user login-link`` becomes a new API
    token of its user (401 for an unknown, used or expired code)."""
    redeemed = await login_code_redeem(conn, data.code)
    if redeemed is None:
        raise NotAuthorizedException("this login link is unknown, used or expired")
    _uid, token = redeemed
    user = await token_authenticate(conn, token)
    if user is None:  # deleted between the two statements
        raise NotAuthorizedException("this login link is unknown, used or expired")
    return LoginResult(token=token, user=Me(id=user.uid, name=user.name, is_admin=user.is_admin))


@get("/api/me", tags=["console"], summary="The caller: id, name, admin or not")
async def me(user: NamedDependency[User]) -> Me:
    return Me(id=user.uid, name=user.name, is_admin=user.is_admin)
