"""One mapping from errors to HTTP: status + ``{"error": {code, message}}``.

Typed queue errors keep their code; validation problems are 400; anything unexpected is
a 500 whose body says nothing about internals (the log has the traceback)."""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import psycopg
from litestar import MediaType, Request, Response
from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotAuthorizedException,
    NotFoundException,
    ValidationException,
)
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from yuxi.agents.models import ModelSpecError
from yuxi.queue import errors as queue_errors
from yuxi.scheduling.cron import CronError

log = logging.getLogger("yuxi.api")

STATUS_BY_ERROR: dict[type[queue_errors.QueueError], int] = {
    queue_errors.Unauthenticated: 401,
    queue_errors.NotFound: 404,
    queue_errors.InvalidInput: 400,
    queue_errors.PayloadTooLarge: 413,
    queue_errors.ReadOnly: 403,
}
CONFLICT = 409

HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
    415: "unsupported_media_type",
    429: "too_many_requests",
}


class ErrorDetail(msgspec.Struct, frozen=True):
    code: str
    message: str


class ErrorBody(msgspec.Struct, frozen=True):
    error: ErrorDetail


class Forbidden(Exception):
    """The caller is known but may not do this (e.g. manage agents without admin)."""


def error_response(status: int, code: str, message: str) -> Response[Any]:
    return Response(
        {"error": {"code": code, "message": message}}, status_code=status, media_type=MediaType.JSON
    )


def queue_error(_: Request[Any, Any, Any], exc: queue_errors.QueueError) -> Response[Any]:
    # by the error's class or the nearest one it derives from (BadPath is an InvalidInput)
    status = next((STATUS_BY_ERROR[c] for c in type(exc).__mro__ if c in STATUS_BY_ERROR), CONFLICT)
    return error_response(status, exc.code, str(exc))


def model_spec_error(_: Request[Any, Any, Any], exc: ModelSpecError) -> Response[Any]:
    return error_response(400, "invalid_model", str(exc))


def cron_error(_: Request[Any, Any, Any], exc: CronError) -> Response[Any]:
    return error_response(400, "invalid_schedule", str(exc))


def data_error(_: Request[Any, Any, Any], exc: psycopg.DataError) -> Response[Any]:
    # class 22 (data exception): a value the database cannot take, e.g. a NUL character
    # in a text or JSON string; the input is at fault, not the server
    detail = exc.diag.message_primary if exc.diag and exc.diag.message_primary else str(exc)
    return error_response(
        400, "invalid_input", f"a value in the request cannot be stored: {detail}"
    )


def constraint_error(
    _: Request[Any, Any, Any], exc: psycopg.errors.CheckViolation
) -> Response[Any]:
    # the tables' CHECK constraints back up the functions' own validation
    constraint = exc.diag.constraint_name if exc.diag else None
    return error_response(
        400, "invalid_input", f"a value breaks the rule {constraint or 'of its column'}"
    )


def forbidden(_: Request[Any, Any, Any], exc: Forbidden) -> Response[Any]:
    return error_response(403, "forbidden", str(exc) or "not allowed")


def validation_error(_: Request[Any, Any, Any], exc: ValidationException) -> Response[Any]:
    details = exc.extra if isinstance(exc.extra, list) else []
    parts = []
    for item in details:
        if isinstance(item, dict):
            where = item.get("key") or item.get("source") or ""
            parts.append(f"{where}: {item.get('message', '')}".strip(": "))
    message = "; ".join(p for p in parts if p) or str(exc.detail)
    if message in ("data: 'data'", "data"):  # litestar's wording for a missing body
        message = "a JSON request body is required"
    return error_response(400, "invalid_request", message)


def http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    if isinstance(exc, NotAuthorizedException):
        return error_response(401, "unauthorized", str(exc.detail))
    if isinstance(exc, (NotFoundException, MethodNotAllowedException)) and _under_lg(request):
        # a route of LangGraph's API that yuxi lacks: the SDKs read a bare 404 as "your
        # thread does not exist" (objects that are not found are yuxi's own 404s)
        return error_response(
            422,
            "unsupported",
            f"{request.method} {request.url.path} is not a route of yuxi's LangGraph API"
            " (docs/langgraph.md lists the routes it serves)",
        )
    status = exc.status_code
    code = HTTP_CODES.get(status, "error" if status < 500 else "internal_error")
    if status >= 500:
        return error_response(status, code, "internal server error")
    return error_response(status, code, str(exc.detail))


def _under_lg(request: Request[Any, Any, Any]) -> bool:
    app = getattr(request.app.state, "yuxi", None)
    prefix = "" if app is None else app.settings.lg_prefix
    path = request.url.path
    return bool(prefix) and (path == prefix or path.startswith(prefix + "/"))


def database_unavailable(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    # the server is down, restarting, or cut this connection: nothing the client did;
    # a retry (with the same request_id for a submit) is safe once it is back
    log.warning("database unavailable on %s %s: %s", request.method, request.url.path, exc)
    response = error_response(
        503, "database_unavailable", "the database is not reachable right now; retry shortly"
    )
    response.headers["Retry-After"] = "1"
    return response


def unexpected_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(HTTP_500_INTERNAL_SERVER_ERROR, "internal_error", "internal server error")


EXCEPTION_HANDLERS = {
    queue_errors.QueueError: queue_error,
    ModelSpecError: model_spec_error,
    CronError: cron_error,
    psycopg.DataError: data_error,
    psycopg.OperationalError: database_unavailable,
    psycopg.InterfaceError: database_unavailable,
    psycopg.errors.CheckViolation: constraint_error,
    Forbidden: forbidden,
    ValidationException: validation_error,
    HTTPException: http_error,
    Exception: unexpected_error,
}
