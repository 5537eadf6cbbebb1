"""What the queue's SQL functions return, as msgspec Structs."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec


class RequestInfo(msgspec.Struct, frozen=True):
    """The request view: where a submitted message stands."""

    request_id: str
    thread_id: UUID
    status: str
    queue_policy: str
    queue_position: int | None
    message_id: int | None
    run_id: UUID | None
    created_at: datetime


class ClaimedRun(msgspec.Struct, frozen=True):
    """A run a worker holds a lease on, with what it needs to execute it."""

    run_id: UUID
    thread_id: UUID
    uid: UUID
    agent_slug: str
    request_id: str
    run_type: str
    created_by_run_id: UUID | None
    input_message_id: int | None
    input_payload: dict[str, Any]
    lease_token: UUID
    lease_expires_at: datetime
    attempt_no: int
    started_at: datetime
    manifest_fingerprint: str | None


class LeaseState(msgspec.Struct, frozen=True):
    status: str
    lease_expires_at: datetime


class Run(msgspec.Struct, frozen=True):
    run_id: UUID
    thread_id: UUID
    uid: UUID
    agent_slug: str
    request_id: str
    run_type: str
    created_by_run_id: UUID | None
    status: str
    attempt_count: int
    manifest_fingerprint: str | None
    output_message_id: int | None
    last_event_seq: int
    error_type: str | None
    error_message: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    cancel_requested_at: datetime | None


class ThreadQueue(msgspec.Struct, frozen=True):
    """A row of the yuxi.thread_queues view."""

    thread_id: UUID
    uid: UUID
    status: str
    paused_reason: str | None
    blocking_run_id: UUID | None
    can_continue: bool
    queued_count: int
    last_run_id: UUID | None
    last_run_status: str | None


class ReconciledRun(msgspec.Struct, frozen=True):
    run_id: UUID
    status: str


class RedeliveredRun(msgspec.Struct, frozen=True):
    run_id: UUID
    job_id: int


class RunEvent(msgspec.Struct, frozen=True):
    """An event to append: its name and JSON payload."""

    event: str
    payload: dict[str, Any] = {}


class OutputMessage(msgspec.Struct, frozen=True):
    """A message a run stores when it finishes."""

    role: str
    content: str
    metadata: dict[str, Any] = {}


class ManifestCommit(msgspec.Struct, frozen=True):
    """The stored fingerprint, and the run's identity read again after the write."""

    fingerprint: str
    identity_error: str | None
    backend_id: str | None
