"""What the routes share: the caller's assistants (visible, non-subagent agents) and
threads, each a 404 for anyone else."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from yuxi.agents.registry import UnknownBackend, get_backend
from yuxi.queue.agents import VisibleAgent, agents_visible
from yuxi.queue.callers import User
from yuxi.queue.errors import NotFound
from yuxi.queue.lg import LgAssistant, LgThread, lg_assistants, lg_thread_list


async def assistants(conn: AsyncConnection[Any], user: User) -> list[VisibleAgent]:
    return [a for a in await agents_visible(conn, user.uid) if not a.is_subagent]


async def assistant(conn: AsyncConnection[Any], user: User, assistant_id: str) -> VisibleAgent:
    for agent in await assistants(conn, user):
        if agent.slug == assistant_id:
            return agent
    raise NotFound(f"assistant {assistant_id} not found")


async def assistant_row(conn: AsyncConnection[Any], user: User, assistant_id: str) -> LgAssistant:
    """The assistant with its version and metadata; 404 for anyone who cannot see it."""
    rows = await lg_assistants(conn, user.uid, assistant_id)
    if not rows:
        raise NotFound(f"assistant {assistant_id} not found")
    return rows[0]


def configurable_items(agent: VisibleAgent) -> list[dict[str, Any]]:
    try:
        backend = get_backend(agent.backend_id)
    except UnknownBackend:
        return []
    return backend.context_schema.get_configurable_items()


async def thread(conn: AsyncConnection[Any], user: User, thread_id: UUID) -> LgThread:
    rows = await lg_thread_list(conn, user.uid, thread_id)
    if not rows:
        raise NotFound(f"thread {thread_id} not found")
    return rows[0]
