"""CORS for browsers on other origins (``YUXI_CORS_ORIGINS``): an ASGI wrapper that adds
the Access-Control-* headers to the responses of a listed origin, streams included.

A listed origin's preflight is answered here, 204 whatever the path (a browser asks
before it knows whether the route exists); every other response of a listed origin
gets its headers on its way out. A request from an origin that is not listed passes
through untouched and gets no CORS header at all, so its browser refuses the response.
Tokens travel in headers (``Authorization``, ``x-api-key``), never in cookies, so
credentials are never allowed: ``*`` is safe, and a listed origin gets nothing more than
``*`` would give it.
"""

from __future__ import annotations

from collections.abc import Iterable

from litestar.enums import ScopeType
from litestar.types import ASGIApp, HTTPResponseStartEvent, Message, Receive, Scope, Send

# what the LangGraph SDKs (JS and Python), agent-chat-ui and the console send
ALLOW_HEADERS = (
    "accept",
    "authorization",
    "content-type",
    "if-none-match",
    "if-range",
    "last-event-id",
    "range",
    "x-api-key",
    "x-auth-scheme",
)
ALLOW_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
# the run's URL (the SDKs' on_run_created and reconnect), and the file routes' headers
EXPOSE_HEADERS = (
    "Content-Location",
    "Location",
    "Content-Disposition",
    "Content-Range",
    "ETag",
    "Retry-After",
)
MAX_AGE_SECONDS = 600


class Cors:
    """Wraps ``app``: responses to a request whose ``Origin`` is one of ``origins`` (or
    any, with ``*``) carry the CORS headers; preflights also name what may be sent."""

    def __init__(self, app: ASGIApp, origins: Iterable[str]) -> None:
        self.app = app
        self.origins = frozenset(origins)
        self.any = "*" in self.origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        origin = _header(scope, b"origin")
        if origin is None or not (self.any or origin in self.origins):
            await self.app(scope, receive, send)
            return
        preflight = (
            scope["method"] == "OPTIONS"
            and _header(scope, b"access-control-request-method") is not None
        )
        added = self._headers(origin, preflight)
        if preflight:
            start: HTTPResponseStartEvent = {
                "type": "http.response.start",
                "status": 204,
                "headers": added,
            }
            await send(start)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [
                    (name, value)
                    for name, value in message.get("headers", [])
                    if not name.lower().startswith(b"access-control-")
                ]
                message["headers"] = [*kept, *added]
            await send(message)

        await self.app(scope, receive, send_with_cors)

    def _headers(self, origin: str, preflight: bool) -> list[tuple[bytes, bytes]]:
        headers = [(b"access-control-allow-origin", b"*" if self.any else origin.encode())]
        if not self.any:
            headers.append((b"vary", b"Origin"))
        if preflight:
            headers += [
                (b"access-control-allow-methods", ", ".join(ALLOW_METHODS).encode()),
                (b"access-control-allow-headers", ", ".join(ALLOW_HEADERS).encode()),
                (b"access-control-max-age", str(MAX_AGE_SECONDS).encode()),
            ]
        else:
            headers.append((b"access-control-expose-headers", ", ".join(EXPOSE_HEADERS).encode()))
        return headers


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None
