"""What a request ended as, for the access log and the metrics: the status its client was
sent, which is not always the one the application answered.

- The client left before a response was sent (a body cut short, a client that gave up
  waiting): ``499``, nginx's "client closed request". The application may still answer
  into the closed connection (litestar answers a body cut short with a 500 that nobody
  reads); that answer is not counted.
- The HTTP layer answered the request itself: uvicorn answers a malformed body (a bad
  chunk size, say) with a 400 and closes the connection, and the application only sees
  its client go. That 400 is counted.

The application is told neither (both are an ``http.disconnect``), so the server's
protocol, ``OutcomeProtocol`` (what yuxi/api/server.py serves with), writes the status
the connection got instead into the request's scope, and ``sent_status`` reads it.
"""

from __future__ import annotations

from typing import Any, cast

from litestar.types import Scope
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

CLIENT_CLOSED_REQUEST = 499
# the status an HTTP request's connection got instead of the application's response
_SENT_INSTEAD = "yuxi.sent_instead"
# what uvicorn sends when the application raised (or returned) before it answered
_SERVER_ERROR = 500


def sent_status(scope: Scope, answered: int | None) -> int:
    """The status the client of ``scope`` was sent: ``answered`` (the status the
    application started its response with, None when it started none) unless the
    connection got another status instead."""
    instead: int | None = cast(dict[str, Any], scope).get(_SENT_INSTEAD)
    if instead is not None:
        return instead
    return _SERVER_ERROR if answered is None else answered


def answered_by_application(scope: Scope) -> bool:
    """Whether the application's response (if any) is what the client was sent."""
    return _SENT_INSTEAD not in scope


class OutcomeProtocol(HttpToolsProtocol):
    """uvicorn's HTTP protocol (httptools, as ``auto`` chooses it), noting in the
    request's scope when its connection gets something other than the application's
    response: the 400 uvicorn sends for a request it cannot parse, or nothing at all
    (``499``) when the client closes the connection before a response started."""

    def send_400_response(self, msg: str) -> None:
        cycle = self.cycle
        # only the request being served: a malformed request after it (pipelined or
        # kept alive) has a scope of its own that the application never saw
        if cycle is not None and cycle.scope is self.scope:
            _note(cycle, 400)
        super().send_400_response(msg)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.cycle is not None:
            _note(self.cycle, CLIENT_CLOSED_REQUEST)
        super().connection_lost(exc)


def _note(cycle: Any, status: int) -> None:
    if not cycle.response_started:
        # the first word stands: the 400's own closing of the connection comes next
        cast(dict[str, Any], cycle.scope).setdefault(_SENT_INSTEAD, status)
