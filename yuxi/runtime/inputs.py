"""Reading what a run needs from the database, and the catalog of resources."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from yuxi.agents.tools import builtin_tool_names
from yuxi.queue.calls import call_one


class ExecutionInput(msgspec.Struct, frozen=True):
    """A row of ``yuxi.run_execution_input``: the run, its conversation, agent, project."""

    run_id: UUID
    thread_id: UUID
    uid: UUID
    request_id: str
    run_type: str
    created_by_run_id: UUID | None
    agent_slug: str
    backend_id: str | None
    agent_config: dict[str, Any] | None
    agent_updated_at: datetime | None
    project_id: UUID | None
    workdir_path: str | None
    input_text: str | None
    input_payload: dict[str, Any]
    identity_error: str | None
    visible_subagents: list[str]  # a chatbot's `subagents` when unset or empty


async def load_execution_input(conn: AsyncConnection[Any], run_id: UUID) -> ExecutionInput:
    return await call_one(conn, ExecutionInput, "yuxi.run_execution_input(%(r)s)", {"r": run_id})


class DatabaseCatalog:
    """Resources as the database knows them. Tools are the built-ins (every user may use
    them); knowledge bases, MCP servers and skills have no catalog yet, so none are
    accessible. (The subagents a user can see come with the run's execution input.)"""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self._pool = pool

    async def accessible(self, kind: str, uid: UUID) -> list[str]:
        if kind == "tools":
            return builtin_tool_names()
        return []

    async def skill_dependencies(self, uid: UUID) -> Mapping[str, Sequence[str]]:
        return {}
