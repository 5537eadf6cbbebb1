"""yuxi's rows in LangGraph's shapes: statuses, assistants, threads, runs, crons."""

from __future__ import annotations

from typing import Any

from yuxi.queue.agents import AgentVersion
from yuxi.queue.lg import LgAssistant, LgRun, LgThread
from yuxi.queue.statuses import ACTIVE_RUN_STATUSES, RequestStatus, RunStatus

# a run's status (None: its request is not dispatched) -> LangGraph's
_RUN_STATUS = {
    RunStatus.PENDING: "pending",
    RunStatus.RUNNING: "running",
    RunStatus.CANCEL_REQUESTED: "running",
    RunStatus.COMPLETED: "success",
    RunStatus.INTERRUPTED: "success",
    RunStatus.FAILED: "error",
    RunStatus.CANCELLED: "interrupted",
}
_REQUEST_STATUS = {
    RequestStatus.QUEUED: "pending",
    RequestStatus.CANCELLED: "interrupted",
    RequestStatus.FAILED: "error",
    RequestStatus.REJECTED: "error",
}
LG_RUN_STATUSES = ("pending", "running", "error", "success", "timeout", "interrupted")


def run_status(row: LgRun) -> str:
    if row.run_status is not None:
        return _RUN_STATUS[RunStatus(row.run_status)]
    return _REQUEST_STATUS.get(RequestStatus(row.request_status), "pending")


def run_ended(row: LgRun) -> bool:
    """The run will not change any more for now (ended, interrupted, or never ran)."""
    if row.run_status is not None:
        return row.run_status not in ACTIVE_RUN_STATUSES
    return row.request_status != RequestStatus.QUEUED


def thread_status(row: LgThread) -> str:
    if row.queue_status == "running":
        return "busy"
    if row.queue_status == "interrupted":
        return "interrupted"
    if row.last_run_status == RunStatus.FAILED:
        return "error"
    return "idle"


def thread_metadata(row: LgThread) -> dict[str, Any]:
    metadata = dict(row.metadata)
    if row.agent_slug is not None:
        metadata["graph_id"] = row.agent_slug
        metadata["assistant_id"] = row.agent_slug
    return metadata


def thread_view(
    row: LgThread, values: dict[str, Any] | None = None, interrupts: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "thread_id": str(row.thread_id),
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "metadata": thread_metadata(row),
        "status": thread_status(row),
        "values": values if values is not None else {},
        "interrupts": interrupts or {},
        "config": {},
        "error": None,
    }


def run_view(row: LgRun) -> dict[str, Any]:
    return {
        "run_id": row.request_id,
        "thread_id": str(row.thread_id),
        "assistant_id": row.agent_slug,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "status": run_status(row),
        "metadata": row.metadata,
        "multitask_strategy": row.multitask_strategy,
        "kwargs": {"stream_mode": row.stream_modes},
    }


def assistant_view(row: LgAssistant) -> dict[str, Any]:
    """An assistant: an agent (assistant id = slug) of a backend (graph id = backend id)."""
    return {
        "assistant_id": row.slug,
        "graph_id": row.backend_id,
        "name": row.name,
        "description": row.description or None,
        "config": {"configurable": {}},
        "context": dict(row.config_json.get("context") or {}),
        "metadata": {**row.metadata, "backend_id": row.backend_id},
        "version": row.version,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def assistant_version_view(slug: str, row: AgentVersion) -> dict[str, Any]:
    return {
        "assistant_id": slug,
        "graph_id": row.backend_id,
        "name": row.name,
        "description": row.description or None,
        "config": {"configurable": {}},
        "context": dict(row.config_json.get("context") or {}),
        "metadata": {**row.metadata, "backend_id": row.backend_id},
        "version": row.version,
        "created_at": row.created_at,
    }


def lg_interrupt_value(value: Any) -> Any:
    """An interrupt value as LangGraph UIs show it, in both shapes they know: langchain's
    HITL request (``action_requests`` / ``review_configs``; tool approvals already have
    it, ``ask_user``'s question gets one ``ask_user`` action whose answer is the resume
    value) and the older agent inbox's (``action_request`` + ``config.allow_*``, of the
    first action), keeping ``question``."""
    if not isinstance(value, dict):
        return value
    if value.get("type") == "question" and "question" in value:
        question = value["question"]
        value = {
            **value,
            "action_requests": [
                {"name": "ask_user", "args": {"question": question}, "description": question}
            ],
            "review_configs": [{"action_name": "ask_user", "allowed_decisions": ["respond"]}],
        }
        allow = {"allow_respond": True, "allow_accept": False, "allow_ignore": False}
    elif value.get("action_requests"):
        allow = {"allow_respond": True, "allow_accept": True, "allow_ignore": True}
    else:
        return value
    first = value["action_requests"][0]
    if not isinstance(first, dict):
        return value
    return {
        **value,
        "action_request": {"action": first.get("name"), "args": first.get("args") or {}},
        "config": {**allow, "allow_edit": False},
        "description": first.get("description") or value.get("description"),
    }


def lg_interrupt(interrupt_id: str, value: Any) -> dict[str, Any]:
    return {"id": interrupt_id, "value": lg_interrupt_value(value)}
