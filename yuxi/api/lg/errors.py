"""A LangGraph feature yuxi does not provide: 422 with what is refused and why."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response

from yuxi.api.errors import error_response


class Refused(Exception):
    """A request asks for a LangGraph feature that yuxi refuses (docs/langgraph.md)."""


def refused(_: Request[Any, Any, Any], exc: Refused) -> Response[Any]:
    return error_response(422, "unsupported", str(exc))
