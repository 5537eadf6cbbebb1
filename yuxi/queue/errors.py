"""Typed errors for the SQLSTATEs raised by yuxi's SQL functions (the list of codes is in
sql/schema/00_vocabulary.sql); yuxi/api/errors.py maps them to HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg


class QueueError(Exception):
    """Base of every error a queue operation raises on purpose."""

    code = "queue_error"
    sqlstate = ""


class NotFound(QueueError):
    code = "not_found"
    sqlstate = "YN001"


class Unauthenticated(QueueError):
    """A call made with a bearer token that no live user holds (yuxi.queue.callers);
    HTTP 401. Raised by the call, not by a SQL function."""

    code = "unauthorized"


class InvalidInput(QueueError):
    code = "invalid_input"
    sqlstate = "YV001"


class RequestIdConflict(QueueError):
    code = "request_id_conflict"
    sqlstate = "YQ001"


class RunInterrupted(QueueError):
    code = "run_interrupted"
    sqlstate = "YQ002"


class RunBusy(QueueError):
    code = "run_busy"
    sqlstate = "YQ003"


class ResumeSuperseded(QueueError):
    code = "resume_superseded"
    sqlstate = "YQ004"


class RunNotInterrupted(QueueError):
    code = "run_not_interrupted"
    sqlstate = "YQ005"


class RequestAlreadyDispatched(QueueError):
    code = "request_already_dispatched"
    sqlstate = "YQ006"


class SteerAlreadyPending(QueueError):
    code = "steer_already_pending"
    sqlstate = "YQ007"


class RunNotSteerable(QueueError):
    code = "run_not_steerable"
    sqlstate = "YQ008"


class QueueNotPaused(QueueError):
    code = "queue_not_paused"
    sqlstate = "YQ009"


class AgentExists(QueueError):
    code = "agent_exists"
    sqlstate = "YQ011"


class ModelExists(QueueError):
    code = "model_exists"
    sqlstate = "YQ012"


class RunNotClaimable(QueueError):
    code = "run_not_claimable"
    sqlstate = "YQ010"


class LeaseLost(QueueError):
    code = "lease_lost"
    sqlstate = "YL001"


class ManifestConflict(QueueError):
    code = "manifest_conflict"
    sqlstate = "YM001"


class PayloadTooLarge(QueueError):
    code = "payload_too_large"
    sqlstate = "YF001"


class FileChanged(QueueError):
    """A file was written by someone else between a read and the write based on it."""

    code = "file_changed"
    sqlstate = "YF002"


class ReadOnly(QueueError):
    """The caller may read the object but not change it (a knowledge base shared with
    them); HTTP 403."""

    code = "forbidden"
    sqlstate = "YA001"


class KnowledgeBaseExists(QueueError):
    code = "knowledge_base_exists"
    sqlstate = "YK001"


class InsufficientCredits(QueueError):
    """The user's credit balance cannot cover what is asked (a run's freeze, a lowered
    balance)."""

    code = "insufficient_credits"
    sqlstate = "YB001"


class ThreadExists(QueueError):
    """A LangGraph-API thread created with an id that is taken (``if_exists`` raise)."""

    code = "thread_exists"
    sqlstate = "YG001"


class AssistantMismatch(QueueError):
    """A LangGraph-API run for a thread bound to another agent."""

    code = "assistant_mismatch"
    sqlstate = "YG002"


class McpServerExists(QueueError):
    code = "mcp_server_exists"
    sqlstate = "YP001"


class IllegalTransition(QueueError):
    code = "illegal_transition"
    sqlstate = "YT001"


BY_SQLSTATE: dict[str, type[QueueError]] = {
    cls.sqlstate: cls
    for cls in (
        NotFound,
        InvalidInput,
        RequestIdConflict,
        RunInterrupted,
        RunBusy,
        ResumeSuperseded,
        RunNotInterrupted,
        RequestAlreadyDispatched,
        SteerAlreadyPending,
        RunNotSteerable,
        AgentExists,
        ModelExists,
        QueueNotPaused,
        RunNotClaimable,
        LeaseLost,
        ManifestConflict,
        PayloadTooLarge,
        FileChanged,
        ReadOnly,
        KnowledgeBaseExists,
        InsufficientCredits,
        ThreadExists,
        AssistantMismatch,
        McpServerExists,
        IllegalTransition,
    )
}


def from_database_error(error: psycopg.Error) -> QueueError | None:
    """The typed error for a yuxi SQLSTATE, or None for any other database error."""
    cls = BY_SQLSTATE.get(error.sqlstate or "")
    if cls is None:
        return None
    primary = error.diag.message_primary if error.diag else None
    return cls(primary or str(error))


@contextmanager
def typed_errors() -> Iterator[None]:
    """Re-raises yuxi's SQLSTATEs as their QueueError subclasses."""
    try:
        yield
    except psycopg.Error as error:
        typed = from_database_error(error)
        if typed is None:
            raise
        raise typed from error
