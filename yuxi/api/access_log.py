"""One access log line per HTTP request, with nothing secret in it.

Logged on ``yuxi.api.access`` at INFO once the response is over (an SSE stream: when it
ends, so ``duration_ms`` is how long the client was connected), as key=value pairs:

    method=GET path=/api/agent/runs/0c6e…/events query=after_seq status=200
    duration_ms=1234.5 bytes=5120 user=8d0f… client=127.0.0.1:51234

``path`` is the path as the client sent it (percent-encoded, without the query
string); ``query`` lists the query's parameter names, never their values; ``bytes`` is
the response body's size; ``user`` is the authenticated caller's id (``-`` before or
without authentication, and on the run routes whose statement checks the token, when
that statement refused the request: another user's run is a 404 with ``user=-``);
``status`` is what the client was sent (yuxi/api/request_outcome.py): ``499`` when it
left before a response was sent, the HTTP layer's own status when that refused the
request (a malformed body: 400), and then ``bytes`` is 0 (the application's answer
went nowhere).
Headers, cookies, query values and bodies are never logged: the bearer token travels in
``Authorization``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from litestar.enums import ScopeType
from litestar.types import ASGIApp, HTTPScope, Message, Receive, Scope, Send

from yuxi.api.request_outcome import answered_by_application, sent_status

log = logging.getLogger("yuxi.api.access")

# a query parameter name longer than this is not a name a client chose to read: it is
# logged as "…", in case it is a value sent without "=" (e.g. a token)
MAX_QUERY_KEY = 32


class AccessLog:
    """ASGI middleware around the whole application, so that unknown paths, refused
    requests and errors are logged like the rest. One log call per request."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP or not log.isEnabledFor(logging.INFO):
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        response = _Response()

        async def send_and_count(message: Message) -> None:
            response.saw(message)
            await send(message)

        try:
            await self._app(scope, receive, send_and_count)
        finally:
            log.info(
                "method=%s path=%s%s status=%d duration_ms=%.1f bytes=%d user=%s client=%s",
                scope["method"],
                _path(scope),
                _query(scope["query_string"]),
                sent_status(scope, response.status),
                (time.perf_counter() - started) * 1000,
                response.bytes if answered_by_application(scope) else 0,
                _user(scope),
                _client(scope),
            )


class _Response:
    __slots__ = ("bytes", "status")

    def __init__(self) -> None:
        self.status: int | None = None  # none started
        self.bytes = 0

    def saw(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body":
            self.bytes += len(message.get("body", b""))


def _path(scope: HTTPScope) -> str:
    raw: bytes | None = scope.get("raw_path")
    if raw is None:  # not every server sets raw_path; path is decoded, so quote it
        return repr(scope["path"])
    return raw.partition(b"?")[0].decode("ascii", "backslashreplace")


def _query(query: bytes) -> str:
    if not query:
        return ""
    names = dict.fromkeys(part.partition(b"=")[0] for part in query.split(b"&") if part)
    shown = (
        name.decode("ascii", "backslashreplace") if len(name) <= MAX_QUERY_KEY else "…"
        for name in names
    )
    return " query=" + ",".join(shown)


def _user(scope: HTTPScope) -> Any:
    # set by the `user` dependency once the bearer token is checked (app.py)
    user = scope.get("user")
    return getattr(user, "uid", None) or "-"


def _client(scope: HTTPScope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "-"
