"""Limits on what a request may send, checked before its body is decoded or stored."""

from __future__ import annotations

import re

from litestar import Request
from litestar.datastructures import State
from litestar.handlers import HTTPRouteHandler

from yuxi.queue.errors import InvalidInput

# Deep enough for any real payload; far below what recursive decoders, the jsonb
# parser and the history renderer can take (PostgreSQL's stack ends long before 10^5).
MAX_JSON_DEPTH = 64

# a JSON string (with its escapes) or one bracket: brackets inside strings do not nest.
# Possessive, so an unterminated string ends the scan instead of being retried from each
# later quote (quadratic: 18 s of event loop for 80 KB of \"\"\"...); brackets after one
# are not counted, and such a body is not JSON anyway (the decoder refuses it).
_TOKENS = re.compile(rb'"(?:[^"\\]++|\\.)*+"?|[\[\]{}]', re.S)


def json_depth(data: bytes, limit: int = MAX_JSON_DEPTH) -> int:
    """How deep ``data`` nests, counted up to ``limit + 1`` (then it stops reading)."""
    if data.count(b"[") + data.count(b"{") <= limit:
        return 0  # cannot be deeper than its number of opening brackets
    depth = deepest = 0
    for token in _TOKENS.finditer(data):
        bracket = token.group()
        if bracket in (b"[", b"{"):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        elif bracket in (b"]", b"}"):
            depth -= 1
    return deepest


def check_json_depth(data: bytes, limit: int = MAX_JSON_DEPTH) -> None:
    """Refuses JSON nested deeper than ``limit`` (``ValueError`` naming the limit)."""
    if json_depth(data, limit) > limit:
        raise ValueError(f"JSON nested deeper than {limit} levels is not accepted")


def decodes_json(handler: HTTPRouteHandler) -> bool:
    """Whether ``handler`` has its body decoded as JSON: it takes ``data`` (every ``data``
    of yuxi's is JSON, and litestar decodes it whatever the Content-Type says). A handler
    without one reads its body itself, if at all (uploads stream it to the file store)."""
    return "data" in handler.parsed_fn_signature.parameters


async def refuse_deep_json(request: Request[object, object, State]) -> None:
    """``before_request`` hook: a body the route decodes as JSON that nests too deep is a
    400 ``invalid_input`` before anything decodes it, whatever its Content-Type (a body
    sent as multipart/form-data, a form or text/plain is decoded as JSON all the same).
    The body is read once; the handler's decoding reuses it."""
    if not decodes_json(request.route_handler):
        return
    try:
        check_json_depth(await request.body())
    except ValueError as error:
        raise InvalidInput(str(error)) from None
