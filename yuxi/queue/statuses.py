"""The status vocabularies of schema ``yuxi``, as Python sees them.

The database owns them (sql/schema/00_vocabulary.sql): the values each status column
admits (``yuxi.run_status_is_valid``, ``request_status_is_valid``,
``delivery_status_is_valid``, ``occurrence_status_is_valid``), the groups of run
statuses (``yuxi.run_is_active``, ``run_is_leased``, ``run_is_final``) and the run state
machine that the guard trigger applies (``yuxi.run_transition_allowed``).
This module mirrors them so Python code names statuses instead of spelling strings;
tests/integration/test_run_transitions.py holds both sides to the same table. Columns
still arrive from psycopg as plain ``str``, and every member compares equal to its value.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """``yuxi.agent_runs.status``."""

    PENDING = "pending"
    RUNNING = "running"
    CANCEL_REQUESTED = "cancel_requested"
    INTERRUPTED = "interrupted"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class RunType(StrEnum):
    """``yuxi.agent_runs.run_type``."""

    CHAT = "chat"
    RESUME = "resume"
    SUBAGENT = "subagent"


class RequestStatus(StrEnum):
    """``yuxi.agent_run_requests.status``; only ``queued`` ever changes."""

    QUEUED = "queued"
    DISPATCHED = "dispatched"
    CANCELLED = "cancelled"
    REJECTED = "rejected"
    FAILED = "failed"


class DeliveryStatus(StrEnum):
    """``yuxi.messages.delivery_status`` of a user message."""

    QUEUED = "queued"
    DISPATCHED = "dispatched"
    COMPLETE = "complete"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REJECTED = "rejected"


class OccurrenceStatus(StrEnum):
    """``yuxi.scheduled_job_occurrences.status``."""

    SUBMITTED = "submitted"
    SKIPPED = "skipped"
    FAILED = "failed"
    PENDING_RETRY = "pending_retry"


# The run holds its thread (at most one active top-level run per thread): yuxi.run_is_active.
ACTIVE_RUN_STATUSES: frozenset[RunStatus] = frozenset(
    {RunStatus.PENDING, RunStatus.RUNNING, RunStatus.CANCEL_REQUESTED}
)
# A worker holds the run under a lease: yuxi.run_is_leased.
LEASED_RUN_STATUSES: frozenset[RunStatus] = frozenset(
    {RunStatus.RUNNING, RunStatus.CANCEL_REQUESTED}
)
# Nothing about the run changes any more: yuxi.run_is_final. `interrupted` is neither
# active nor final: it waits for a resume or a cancel.
FINAL_RUN_STATUSES: frozenset[RunStatus] = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED}
)
# The run's execution is over, for now or for good: what a stream of its events, or a
# parent waiting on a child run, waits for.
ENDED_RUN_STATUSES: frozenset[RunStatus] = FINAL_RUN_STATUSES | {RunStatus.INTERRUPTED}

# The statuses a run may move to from each status: yuxi.run_transition_allowed, which
# the guard trigger yuxi.agent_runs_guard applies to every writer (raw UPDATEs too, which
# it refuses with SQLSTATE YT001). Keeping the same status is not a transition and is
# always allowed (a lease renewal updates a running run). Drawn in docs/queue.md.
RUN_TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.PENDING: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED}),
    RunStatus.RUNNING: frozenset(
        {
            RunStatus.CANCEL_REQUESTED,
            RunStatus.COMPLETED,
            RunStatus.FAILED,
            RunStatus.INTERRUPTED,
            RunStatus.PENDING,
        }
    ),
    RunStatus.CANCEL_REQUESTED: frozenset(
        {RunStatus.CANCELLED, RunStatus.COMPLETED, RunStatus.FAILED}
    ),
    RunStatus.INTERRUPTED: frozenset({RunStatus.CANCELLED}),
    RunStatus.COMPLETED: frozenset(),
    RunStatus.FAILED: frozenset(),
    RunStatus.CANCELLED: frozenset(),
}


def run_transition_allowed(old: RunStatus | str, new: RunStatus | str) -> bool:
    """Whether a run may go from ``old`` to ``new`` (the same status always may)."""
    old, new = RunStatus(old), RunStatus(new)
    return old == new or new in RUN_TRANSITIONS[old]
