"""Run claims built in memory, for tests of what the worker does with one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

from yuxi.queue.runs import RunClaim, RunClaimRow


def run_claim(**values: Any) -> RunClaim:
    """A claim of a chat run of ``chatbot`` saying "hi", with ``values`` (the columns of
    ``yuxi.run_claim_execution``) changed."""
    row: dict[str, Any] = {
        "run_id": uuid4(),
        "thread_id": uuid4(),
        "uid": UUID(int=1),
        "agent_slug": "chatbot",
        "request_id": "r1",
        "run_type": "chat",
        "created_by_run_id": None,
        "input_message_id": None,
        "input_payload": {"model_spec": "builtin:scripted", "tool_approval_mode": "auto"},
        "lease_token": uuid4(),
        "lease_expires_at": datetime.now(UTC),
        "attempt_no": 1,
        "started_at": datetime.now(UTC),
        "manifest_fingerprint": None,
        "backend_id": "chatbot",
        "agent_config": None,
        "agent_updated_at": None,
        "project_id": None,
        "workdir_path": None,
        "input_text": "hi",
        "identity_error": None,
        "visible_subagents": [],
        "attachments": [],
        "model": None,
        "model_key_sealed": None,
        "input_attachments": None,
        "catalog": None,
        "credit_hold": None,
        "credit_error": None,
    }
    row.update(values)
    return RunClaimRow(**row).grouped()
