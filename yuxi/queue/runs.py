"""Runs (``yuxi.run_*``): claim under a lease, renew, write the manifest, finish,
release, cancel, resume, create a child run, read."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.callers import Bearer
from yuxi.queue.calls import call_many, call_one, call_scalar, encode_json
from yuxi.queue.events import RunEvent, notify_run_events
from yuxi.queue.requests import RequestInfo
from yuxi.queue.statuses import RunType


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
    """A row of ``yuxi.agent_runs`` (without its manifest and lease token)."""

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
    # attempts given back for causes outside the agent (not its max_run_attempts)
    infra_retries: int = 0


class RunOutcome(msgspec.Struct, frozen=True):
    """A row of ``yuxi.run_result``: how the run ended and what it answered."""

    status: str
    output: str | None
    final_message_id: int | None
    error_type: str | None
    error_message: str | None
    # {input_tokens, output_tokens, cached_tokens, reasoning_tokens, total_tokens, cost,
    # by_model}; None until the run's finish recorded some
    usage: dict[str, Any] | None


class OutputMessage(msgspec.Struct, frozen=True):
    """A message a run stores when it finishes."""

    role: str
    content: str
    metadata: dict[str, Any] = {}


class CommittedManifest(msgspec.Struct, frozen=True):
    """A run's write-once manifest and the fingerprint stored with it."""

    manifest: dict[str, Any]
    manifest_fingerprint: str


class ManifestCommit(msgspec.Struct, frozen=True):
    """The stored fingerprint, and the run's identity read again after the write."""

    fingerprint: str
    identity_error: str | None
    backend_id: str | None
    last_event_seq: int


async def run_claim(
    conn: AsyncConnection[Any],
    run_id: UUID,
    *,
    worker: str,
    lease_seconds: float,
    now: datetime | None = None,
) -> ClaimedRun:
    """Takes a pending run: a new attempt and lease token. RunNotClaimable otherwise."""
    return await call_one(
        conn,
        ClaimedRun,
        "yuxi.run_claim(p_run_id => %(run_id)s, p_worker => %(worker)s,"
        " p_lease_seconds => %(lease_seconds)s, p_now => %(now)s)",
        {"run_id": run_id, "worker": worker, "lease_seconds": lease_seconds, "now": now},
    )


class RunLease(msgspec.Struct, frozen=True):
    """The attempt a worker holds: what every lease-checked call of it sends."""

    run_id: UUID
    token: UUID
    expires_at: datetime
    attempt_no: int
    started_at: datetime


class RunIdentity(msgspec.Struct, frozen=True):
    """Whose run it is, in which conversation, and of what kind. ``identity_error``: why
    the run may not execute (the conversation was deleted, rebound, or is another
    user's), read with the claim."""

    run_id: UUID
    thread_id: UUID
    uid: UUID
    request_id: str
    run_type: str
    created_by_run_id: UUID | None
    agent_slug: str
    input_message_id: int | None
    identity_error: str | None

    @property
    def is_subagent(self) -> bool:
        """Whether this is a child run started by a parent's ``task`` tool: the one
        question of "is this a subagent run", asked of the run, never of its Context."""
        return self.run_type == RunType.SUBAGENT


class RunInput(msgspec.Struct, frozen=True):
    """What the run was asked: the input message's text, the request's payload
    (``model_spec``, ``tool_approval_mode``, a resume's ``resume``, a child's ``task``),
    the thread's attachments ``[{id, filename, path, bytes, media_type}]`` and the ids of
    those the input message refers to."""

    text: str | None
    payload: dict[str, Any]
    attachments: list[dict[str, Any]]
    referred: list[str] | None


class RunAgent(msgspec.Struct, frozen=True):
    """The agent as the claim read it, and the conversation's project."""

    backend_id: str | None
    config: dict[str, Any] | None
    updated_at: datetime | None
    project_id: UUID | None
    workdir_path: str | None
    # a chatbot's `subagents` when unset or empty
    visible_subagents: list[str]


class RunModel(msgspec.Struct, frozen=True):
    """The registry row of the payload's ``model_spec`` (no key) and its sealed key;
    both None for a model the registry does not know."""

    row: dict[str, Any] | None
    key_sealed: bytes | None


class RunCredit(msgspec.Struct, frozen=True):
    """The run's credit freeze: what it holds (None when no budget applies), or why the
    balance could not cover its first model call."""

    hold: Decimal | None
    error: str | None


class RunTree(msgspec.Struct, frozen=True):
    """A file tree a run works on, as the claim saw it (a cache that synced ``version``
    is current)."""

    id: UUID
    version: int
    root: str = ""


class RunFiles(msgspec.Struct, frozen=True):
    """The run's user's workspace tree, and its conversation's workdir tree (None when
    the run has no live conversation)."""

    workspace: RunTree
    workdir: RunTree | None = None


class RunClaim(msgspec.Struct, frozen=True):
    """What ``yuxi.run_claim_execution`` returns, grouped: the lease, the run's identity,
    its input, agent, model, what the user may use (``yuxi.run_catalog``:
    ``{knowledge_bases, skills, mcp_servers}``), its credit freeze and its file trees."""

    lease: RunLease
    run: RunIdentity
    input: RunInput
    agent: RunAgent
    model: RunModel
    catalog: dict[str, Any] | None
    credit: RunCredit
    # the file trees it works on (yuxi.run_file_trees)
    files: RunFiles | None = None
    # the manifest an earlier attempt committed (a retry must derive the same)
    manifest_fingerprint: str | None = None


class RunClaimRow(ClaimedRun, frozen=True):
    """A row of ``yuxi.run_claim_execution`` as it comes: a ClaimedRun and the rest of
    its columns; ``grouped()`` is the RunClaim the executor reads."""

    backend_id: str | None
    agent_config: dict[str, Any] | None
    agent_updated_at: datetime | None
    project_id: UUID | None
    workdir_path: str | None
    input_text: str | None
    identity_error: str | None
    visible_subagents: list[str]
    attachments: list[dict[str, Any]]
    model: dict[str, Any] | None
    model_key_sealed: bytes | None
    input_attachments: list[str] | None
    catalog: dict[str, Any] | None
    credit_hold: Decimal | None
    credit_error: str | None
    file_trees: dict[str, Any] | None = None

    def grouped(self) -> RunClaim:
        return RunClaim(
            lease=RunLease(
                self.run_id,
                self.lease_token,
                self.lease_expires_at,
                self.attempt_no,
                self.started_at,
            ),
            run=RunIdentity(
                self.run_id,
                self.thread_id,
                self.uid,
                self.request_id,
                self.run_type,
                self.created_by_run_id,
                self.agent_slug,
                self.input_message_id,
                self.identity_error,
            ),
            input=RunInput(
                self.input_text, self.input_payload, self.attachments, self.input_attachments
            ),
            agent=RunAgent(
                self.backend_id,
                self.agent_config,
                self.agent_updated_at,
                self.project_id,
                self.workdir_path,
                self.visible_subagents,
            ),
            model=RunModel(self.model, self.model_key_sealed),
            catalog=self.catalog,
            credit=RunCredit(self.credit_hold, self.credit_error),
            files=None if self.file_trees is None else msgspec.convert(self.file_trees, RunFiles),
            manifest_fingerprint=self.manifest_fingerprint,
        )


async def run_claim_execution(
    conn: AsyncConnection[Any],
    run_id: UUID,
    *,
    worker: str,
    lease_seconds: float,
    now: datetime | None = None,
) -> RunClaim:
    """The executor's claim: ``run_claim`` and what the run needs to execute, in one call
    (its commit does not wait for the WAL flush; see sql/schema/08_runs.sql)."""
    row = await call_one(
        conn,
        RunClaimRow,
        "yuxi.run_claim_execution(p_run_id => %(run_id)s, p_worker => %(worker)s,"
        " p_lease_seconds => %(lease_seconds)s, p_now => %(now)s)",
        {"run_id": run_id, "worker": worker, "lease_seconds": lease_seconds, "now": now},
    )
    return row.grouped()


async def run_renew_lease(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    *,
    lease_seconds: float,
    now: datetime | None = None,
) -> LeaseState:
    """Extends the lease; the returned status tells the holder of a cancel request."""
    return await call_one(
        conn,
        LeaseState,
        "yuxi.run_renew_lease(p_run_id => %(run_id)s, p_token => %(token)s,"
        " p_lease_seconds => %(lease_seconds)s, p_now => %(now)s)",
        {"run_id": run_id, "token": token, "lease_seconds": lease_seconds, "now": now},
    )


async def run_check_lease(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    *,
    uid: UUID,
    now: datetime | None = None,
) -> None:
    """Raises ``LeaseLost`` unless ``token`` holds an unexpired lease on the run of ``uid``."""
    await call_scalar(
        conn,
        "SELECT yuxi.run_check_lease(p_run_id => %(run_id)s, p_token => %(token)s,"
        " p_uid => %(uid)s, p_now => %(now)s)",
        {"run_id": run_id, "token": token, "uid": uid, "now": now},
    )


async def run_write_manifest(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    *,
    manifest: dict[str, Any],
    fingerprint: str,
    now: datetime | None = None,
) -> str:
    """Stores the manifest once; ManifestConflict when a different one is already there."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.run_write_manifest(p_run_id => %(run_id)s, p_token => %(token)s,"
        " p_manifest => %(manifest)s::jsonb, p_fingerprint => %(fingerprint)s,"
        " p_now => %(now)s)",
        {
            "run_id": run_id,
            "token": token,
            "manifest": encode_json(manifest),
            "fingerprint": fingerprint,
            "now": now,
        },
    )
    return str(value)


async def run_commit_manifest(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    *,
    manifest: dict[str, Any],
    fingerprint: str,
    backend_id: str | None = None,
    events: Sequence[RunEvent] = (),
    batch: int | None = None,
) -> ManifestCommit:
    """``run_write_manifest``, then the run's identity as it stands now, in one call;
    while the identity holds (and the backend is still ``backend_id``), ``events`` are
    appended as the attempt's batch ``batch`` in the same transaction, without a NOTIFY
    (the caller announces them)."""
    return await call_one(
        conn,
        ManifestCommit,
        "yuxi.run_commit_manifest(p_run_id => %(run_id)s, p_token => %(token)s,"
        " p_manifest => %(manifest)s::jsonb, p_fingerprint => %(fingerprint)s,"
        " p_backend_id => %(backend_id)s, p_events => %(events)s::jsonb, p_batch => %(batch)s)",
        {
            "run_id": run_id,
            "token": token,
            "manifest": encode_json(manifest),
            "fingerprint": fingerprint,
            "backend_id": backend_id,
            "events": encode_json(list(events)),
            "batch": batch,
        },
    )


async def run_finish(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    *,
    status: str,
    messages: Sequence[OutputMessage] = (),
    error_type: str | None = None,
    error_message: str | None = None,
    now: datetime | None = None,
    notify_after_commit: bool = False,
    events: Sequence[RunEvent] = (),
    usage: Sequence[dict[str, Any]] = (),
    announce_from: int | None = None,
) -> Run:
    """Ends the run, stores its output messages, appends its last ``events`` and its
    `end` event, records its token ``usage`` (rows of ``yuxi.run_usage``) and moves the
    thread's queue on (next dispatch, or pause), all in one transaction.

    ``notify_after_commit``: as for ``run_append_events``; the notification carries the
    last events and the `end`, and those from ``announce_from`` on (events committed
    before without a notification)."""
    run = await call_one(
        conn,
        Run,
        "yuxi.run_finish(p_run_id => %(run_id)s, p_token => %(token)s, p_status => %(status)s,"
        " p_messages => %(messages)s::jsonb, p_error_type => %(error_type)s,"
        " p_error_message => %(error_message)s, p_now => %(now)s, p_notify => %(notify)s,"
        " p_events => %(events)s::jsonb, p_usage => %(usage)s::jsonb)",
        {
            "run_id": run_id,
            "token": token,
            "status": status,
            "messages": encode_json(list(messages)),
            "error_type": error_type,
            "error_message": error_message,
            "now": now,
            "notify": not notify_after_commit,
            "events": encode_json(list(events)),
            "usage": encode_json(list(usage)),
        },
    )
    if notify_after_commit:
        first = run.last_event_seq - len(events)
        await notify_run_events(conn, run.run_id, run.last_event_seq, first, announce_from)
    return run


async def run_release(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    *,
    reason: str | None = None,
    now: datetime | None = None,
    infra_limit: int = 3,
) -> Run:
    """Gives the run back for another attempt, an infrastructure retry (failed with
    ``worker_shutdown`` once ``infra_limit`` are spent; cancelled instead if cancel was
    requested)."""
    return await call_one(
        conn,
        Run,
        "yuxi.run_release(p_run_id => %(run_id)s, p_token => %(token)s,"
        " p_reason => %(reason)s, p_now => %(now)s, p_infra_limit => %(infra)s)",
        {"run_id": run_id, "token": token, "reason": reason, "now": now, "infra": infra_limit},
    )


async def run_request_cancel(
    conn: AsyncConnection[Any],
    run_id: UUID,
    *,
    uid: UUID | None = None,
    now: datetime | None = None,
) -> str:
    """Cancels a pending or interrupted run at once, or marks a running one
    cancel_requested (its child runs too); returns the run's status after."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.run_request_cancel(p_run_id => %(run_id)s, p_uid => %(uid)s,"
        " p_now => %(now)s)",
        {"run_id": run_id, "uid": uid, "now": now},
    )
    return str(value)


async def run_resume(
    conn: AsyncConnection[Any],
    run_id: UUID,
    *,
    resume: Any,
    uid: UUID | None = None,
    request_id: str | None = None,
) -> RequestInfo:
    """Creates (once) the resume run of the thread's latest, interrupted run."""
    return await call_one(
        conn,
        RequestInfo,
        "yuxi.run_resume(p_run_id => %(run_id)s, p_resume => %(resume)s::jsonb,"
        " p_uid => %(uid)s, p_request_id => %(request_id)s)",
        {"run_id": run_id, "resume": encode_json(resume), "uid": uid, "request_id": request_id},
    )


async def run_create_subagent(
    conn: AsyncConnection[Any],
    parent_run_id: UUID,
    token: UUID,
    *,
    agent_slug: str,
    run_input: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> UUID:
    """Creates a child run on behalf of the parent's lease holder."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.run_create_subagent(p_parent_run_id => %(parent)s, p_token => %(token)s,"
        " p_agent_slug => %(agent)s, p_input => %(input)s::jsonb, p_now => %(now)s)",
        {
            "parent": parent_run_id,
            "token": token,
            "agent": agent_slug,
            "input": encode_json(run_input or {}),
            "now": now,
        },
    )
    return UUID(str(value))


async def run_get(
    conn: AsyncConnection[Any], run_id: UUID, *, uid: UUID | Bearer | None = None
) -> Run:
    return await call_one(
        conn,
        Run,
        "yuxi.run_get(p_run_id => %(run_id)s, p_uid => %(uid)s)",
        {"run_id": run_id, "uid": uid},
    )


async def run_get_manifest(
    conn: AsyncConnection[Any], run_id: UUID, *, uid: UUID | None = None
) -> CommittedManifest | None:
    """The run's committed manifest and its fingerprint (columns of ``yuxi.run_get``),
    or None before the worker committed one."""
    rows = await call_many(
        conn,
        CommittedManifest,
        "yuxi.run_get(p_run_id => %(run_id)s, p_uid => %(uid)s)"
        " WHERE manifest_fingerprint IS NOT NULL",
        {"run_id": run_id, "uid": uid},
    )
    return rows[0] if rows else None


async def run_result(
    conn: AsyncConnection[Any], run_id: UUID, *, uid: UUID | Bearer | None = None
) -> RunOutcome:
    return await call_one(
        conn,
        RunOutcome,
        "yuxi.run_result(p_run_id => %(run_id)s, p_uid => %(uid)s)",
        {"run_id": run_id, "uid": uid},
    )


async def run_usage(conn: AsyncConnection[Any], run_id: UUID) -> dict[str, Any] | None:
    """The run's usage (``yuxi.run_usage_json``), None before its finish recorded any."""
    value = await call_scalar(
        conn, "SELECT yuxi.run_usage_json(p_run_id => %(run_id)s)", {"run_id": run_id}
    )
    return None if value is None else dict(value)


async def run_catalog(conn: AsyncConnection[Any], uid: UUID) -> dict[str, Any]:
    """What the user may use (``yuxi.run_catalog``): ``{knowledge_bases, skills,
    mcp_servers}``, as a run's claim reads it."""
    catalog: dict[str, Any] = await call_scalar(
        conn, "SELECT yuxi.run_catalog(%(uid)s)", {"uid": uid}
    )
    return catalog


async def run_retry(
    conn: AsyncConnection[Any],
    run_id: UUID,
    token: UUID,
    *,
    error_type: str,
    error_message: str,
    cause: str = "infrastructure",
    infra_limit: int = 3,
    now: datetime | None = None,
    notify_after_commit: bool = False,
) -> Run:
    """After an error cut the attempt: the run goes back to ``pending`` for another
    attempt, else it fails with ``error_type`` (a cancel_requested run is cancelled).
    ``cause`` ``infrastructure`` (a lost database connection) retries within
    ``infra_limit`` infrastructure retries; ``agent`` (the agent, its model or a tool
    failed) within the agent's ``max_run_attempts``.

    ``notify_after_commit``: as for ``run_finish`` (a failed or cancelled run wrote its
    `end` event)."""
    run = await call_one(
        conn,
        Run,
        "yuxi.run_retry(p_run_id => %(run_id)s, p_token => %(token)s,"
        " p_error_type => %(error_type)s, p_error_message => %(error_message)s,"
        " p_now => %(now)s, p_notify => %(notify)s, p_cause => %(cause)s,"
        " p_infra_limit => %(infra)s)",
        {
            "run_id": run_id,
            "token": token,
            "error_type": error_type,
            "error_message": error_message,
            "now": now,
            "notify": not notify_after_commit,
            "cause": cause,
            "infra": infra_limit,
        },
    )
    if notify_after_commit and run.status != "pending":
        await notify_run_events(conn, run.run_id, run.last_event_seq, run.last_event_seq)
    return run


async def run_tool_call_result(
    conn: AsyncConnection[Any], run_id: UUID, call_id: str
) -> str | None:
    """The result recorded for the run's tool call ``call_id``; None when not applied."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.run_tool_call_result(p_run_id => %(run)s, p_call_id => %(call)s)",
        {"run": run_id, "call": call_id},
    )
    return None if value is None else str(value)


async def run_tool_call_record(
    conn: AsyncConnection[Any], run_id: UUID, token: UUID, call_id: str, tool: str, result: str
) -> bool:
    """Records that the run applied tool call ``call_id`` (in the effect's transaction,
    where it has one); False when it was recorded already: the effect must not be
    applied again. Raises LeaseLost."""
    return bool(
        await call_scalar(
            conn,
            "SELECT yuxi.run_tool_call_record(p_run_id => %(run)s, p_token => %(token)s,"
            " p_call_id => %(call)s, p_tool => %(tool)s, p_result => %(result)s)",
            {"run": run_id, "token": token, "call": call_id, "tool": tool, "result": result},
        )
    )
