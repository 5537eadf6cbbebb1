"""What the operator commands read and write: every agent, every user, every busy queue.

The reads call the functions of ``0009_operator_reads.sql``; an agent is saved through
``yuxi.agent_save``, the function behind ``POST /api/agents`` and
``PUT /api/agents/{slug}``, after the same checks the API makes on the body.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.agents.registry import UnknownBackend, get_backend
from yuxi.api.dto import CreateAgent, SaveAgent
from yuxi.queue.calls import call_many, call_scalar, encode_json


class AgentListing(msgspec.Struct, frozen=True):
    """A row of ``yuxi.agent_list()``."""

    slug: str
    name: str
    description: str
    backend_id: str
    config_json: dict[str, Any]
    share_scope: str
    shared_with: list[UUID]
    shared_with_names: list[str]
    is_subagent: bool
    max_run_attempts: int
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None


class UserListing(msgspec.Struct, frozen=True):
    """A row of ``yuxi.user_list()``: no token, no hash."""

    id: UUID
    name: str
    is_admin: bool
    active_tokens: int
    last_used_at: datetime | None
    created_at: datetime


class ThreadQueueListing(msgspec.Struct, frozen=True):
    """A row of ``yuxi.thread_queue_list()``: the ``thread_queues`` view and more."""

    thread_id: UUID
    uid: UUID
    owner: str
    agent_slug: str
    status: str
    paused_reason: str | None
    blocking_run_id: UUID | None
    can_continue: bool
    queued_count: int
    waiting_since: datetime | None
    last_run_id: UUID | None
    last_run_status: str | None


class QueueRequest(msgspec.Struct, frozen=True):
    """A row of ``yuxi.thread_queue_requests()``."""

    request_id: str
    status: str
    queue_policy: str
    queue_position: int | None
    source: str
    run_id: UUID | None
    run_status: str | None
    query: str | None
    created_at: datetime


class AgentFileError(ValueError):
    """An agent file the API would refuse with a 400; the message says why."""


async def list_agents(conn: AsyncConnection[Any]) -> list[AgentListing]:
    """Every agent, deleted ones included, by slug."""
    return await call_many(conn, AgentListing, "yuxi.agent_list()", {})


async def list_users(conn: AsyncConnection[Any]) -> list[UserListing]:
    """Live users by name, with their count of unrevoked tokens."""
    return await call_many(conn, UserListing, "yuxi.user_list()", {})


async def list_thread_queues(
    conn: AsyncConnection[Any], thread_id: UUID | None = None
) -> list[ThreadQueueListing]:
    """Threads that are not ``ready``; with ``thread_id``, that thread's row only."""
    return await call_many(
        conn, ThreadQueueListing, "yuxi.thread_queue_list(%(t)s)", {"t": thread_id}
    )


async def thread_queue_requests(
    conn: AsyncConnection[Any], thread_id: UUID, *, include_finished: bool = False
) -> list[QueueRequest]:
    """A thread's requests in dispatch order: by default the active and queued ones."""
    return await call_many(
        conn,
        QueueRequest,
        "yuxi.thread_queue_requests(%(t)s, %(a)s)",
        {"t": thread_id, "a": include_finished},
    )


def parse_agent_file(data: bytes) -> CreateAgent:
    """Decodes an agent file (the body of ``POST /api/agents``) and checks its backend."""
    try:
        spec = msgspec.json.decode(data, type=CreateAgent)
    except msgspec.ValidationError as error:
        raise AgentFileError(f"invalid agent: {error}") from None
    except msgspec.DecodeError as error:
        raise AgentFileError(f"malformed JSON: {error}") from None
    try:
        get_backend(spec.backend_id)
    except UnknownBackend as error:
        raise AgentFileError(str(error)) from None
    return spec


def agent_file(agent: AgentListing) -> dict[str, Any]:
    """The agent as the file ``parse_agent_file`` reads (to edit and save it again)."""
    return {
        "slug": agent.slug,
        "name": agent.name,
        "description": agent.description,
        "backend_id": agent.backend_id,
        "config": agent.config_json,
        "share_scope": agent.share_scope,
        "shared_with": [str(uid) for uid in agent.shared_with],
        "is_subagent": agent.is_subagent,
        "max_run_attempts": agent.max_run_attempts,
    }


async def save_agent(
    conn: AsyncConnection[Any], slug: str, spec: SaveAgent, *, create: bool
) -> None:
    """Creates the agent (``AgentExists`` if the slug is taken) or replaces every setting
    of a live one (``NotFound`` otherwise), with ``yuxi.agent_save``. The API's agent
    routes and the CLI both save through here."""
    await call_scalar(
        conn,
        "SELECT yuxi.agent_save(%(c)s, %(s)s, %(n)s, %(d)s, %(b)s, %(cfg)s::jsonb, %(sc)s,"
        " %(sw)s::uuid[], %(sub)s, %(m)s)",
        {
            "c": create,
            "s": slug,
            "n": spec.name,
            "d": spec.description,
            "b": spec.backend_id,
            "cfg": encode_json(spec.config),
            "sc": spec.share_scope,
            "sw": list(spec.shared_with),
            "sub": spec.is_subagent,
            "m": spec.max_run_attempts,
        },
    )
