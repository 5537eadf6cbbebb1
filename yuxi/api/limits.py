"""Limits on what a request may send, checked before its body is decoded or stored."""

from __future__ import annotations

import re

from litestar import Request
from litestar.datastructures import State

from yuxi.queue.errors import InvalidInput

# Deep enough for any real payload; far below what recursive decoders, the jsonb
# parser and the history renderer can take (PostgreSQL's stack ends long before 10^5).
MAX_JSON_DEPTH = 64

# A route handler whose ``opt`` sets this takes a raw body (not JSON) and reads it
# itself: the depth check leaves it alone.
RAW_BODY = "raw_body"

# a JSON string (with its escapes) or one bracket: brackets inside strings do not nest
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


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


async def refuse_deep_json(request: Request[object, object, State]) -> None:
    """``before_request`` hook: a JSON body nested too deep is a 400 ``invalid_input``
    before anything is decoded (the body is read once; the handler's decoding reuses it).
    Handlers marked ``RAW_BODY`` are skipped: their body is not JSON."""
    if request.method in ("GET", "HEAD", "OPTIONS", "DELETE"):
        return
    if request.headers.get("content-type", "").lower().startswith("multipart/"):
        return  # uploads stream to disk (yuxi/api/uploads.py): never read whole here
    if request.route_handler.opt.get(RAW_BODY):
        return
    try:
        check_json_depth(await request.body())
    except ValueError as error:
        raise InvalidInput(str(error)) from None
