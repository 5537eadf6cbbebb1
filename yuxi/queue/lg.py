"""The LangGraph-compatible API's SQL (``yuxi.lg_*``, sql/schema/22_langgraph.sql):
threads bound to an agent by their first run, their metadata, runs with a multitask
strategy."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.calls import call_many, call_one, call_scalar, encode_json
from yuxi.queue.requests import RequestInfo


class LgThread(msgspec.Struct, frozen=True):
    """A row of ``yuxi.lg_thread_list``; ``agent_slug`` is None while unbound."""

    thread_id: UUID
    agent_slug: str | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    queue_status: str
    last_run_status: str | None


class LgRun(msgspec.Struct, frozen=True):
    """A row of ``yuxi.lg_thread_runs``: a request and its run, if dispatched."""

    request_id: str
    thread_id: UUID
    agent_slug: str
    request_status: str
    run_id: UUID | None
    run_status: str | None
    error_type: str | None
    error_message: str | None
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any]
    multitask_strategy: str
    stream_modes: list[str]


async def lg_thread_create(
    conn: AsyncConnection[Any],
    uid: UUID,
    *,
    thread_id: UUID | None,
    metadata: dict[str, Any],
    agent_slug: str | None,
    if_exists: str,
) -> UUID:
    value = await call_scalar(
        conn,
        "SELECT yuxi.lg_thread_create(p_uid => %(uid)s, p_thread_id => %(thread_id)s,"
        " p_metadata => %(metadata)s::jsonb, p_agent_slug => %(agent)s,"
        " p_if_exists => %(if_exists)s)",
        {
            "uid": uid,
            "thread_id": thread_id,
            "metadata": encode_json(metadata),
            "agent": agent_slug,
            "if_exists": if_exists,
        },
    )
    return UUID(str(value))


async def lg_thread_bind(
    conn: AsyncConnection[Any], uid: UUID, thread_id: UUID, agent_slug: str
) -> None:
    await call_scalar(
        conn,
        "SELECT thread_id FROM yuxi.lg_thread_bind(p_uid => %(uid)s,"
        " p_thread_id => %(thread_id)s, p_agent_slug => %(agent)s)",
        {"uid": uid, "thread_id": thread_id, "agent": agent_slug},
    )


async def lg_thread_list(
    conn: AsyncConnection[Any], uid: UUID, thread_id: UUID | None = None
) -> list[LgThread]:
    return await call_many(
        conn,
        LgThread,
        "yuxi.lg_thread_list(p_uid => %(uid)s, p_thread_id => %(thread_id)s)",
        {"uid": uid, "thread_id": thread_id},
    )


async def lg_thread_patch(
    conn: AsyncConnection[Any], uid: UUID, thread_id: UUID, metadata: dict[str, Any]
) -> None:
    await call_scalar(
        conn,
        "SELECT yuxi.lg_thread_patch(p_uid => %(uid)s, p_thread_id => %(thread_id)s,"
        " p_metadata => %(metadata)s::jsonb)",
        {"uid": uid, "thread_id": thread_id, "metadata": encode_json(metadata)},
    )


async def lg_thread_delete(conn: AsyncConnection[Any], uid: UUID, thread_id: UUID) -> None:
    await call_scalar(
        conn,
        "SELECT yuxi.lg_thread_delete(p_uid => %(uid)s, p_thread_id => %(thread_id)s)",
        {"uid": uid, "thread_id": thread_id},
    )


async def lg_thread_set_temporary(conn: AsyncConnection[Any], uid: UUID, thread_id: UUID) -> None:
    """Marks a stateless run's thread: deleted once its runs have ended."""
    await call_scalar(
        conn,
        "SELECT yuxi.lg_thread_set_temporary(p_uid => %(uid)s, p_thread_id => %(thread_id)s)",
        {"uid": uid, "thread_id": thread_id},
    )


async def lg_temporary_sweep(conn: AsyncConnection[Any], *, limit: int = 100) -> int:
    """Deletes the threads of stateless runs whose runs have all ended; how many."""
    value = await call_scalar(
        conn, "SELECT yuxi.lg_temporary_sweep(p_limit => %(limit)s)", {"limit": limit}
    )
    return int(value)


async def lg_run_submit(
    conn: AsyncConnection[Any],
    uid: UUID,
    thread_id: UUID,
    *,
    query: str,
    request_id: str,
    strategy: str,
    model_spec: str | None,
    tool_approval_mode: str | None,
    metadata: dict[str, Any],
    stream_modes: Sequence[str],
    configurable: dict[str, Any] | None = None,
) -> RequestInfo:
    """Submits a run with a multitask strategy (enqueue, reject, interrupt);
    ``configurable``: the client's own keys for the graph's config."""
    return await call_one(
        conn,
        RequestInfo,
        "yuxi.lg_run_submit(p_uid => %(uid)s, p_thread_id => %(thread_id)s,"
        " p_query => %(query)s, p_request_id => %(request_id)s, p_strategy => %(strategy)s,"
        " p_model_spec => %(model_spec)s, p_tool_approval_mode => %(mode)s,"
        " p_metadata => %(metadata)s::jsonb, p_stream_modes => %(modes)s,"
        " p_configurable => %(configurable)s::jsonb)",
        {
            "uid": uid,
            "thread_id": thread_id,
            "query": query,
            "request_id": request_id,
            "strategy": strategy,
            "model_spec": model_spec,
            "mode": tool_approval_mode,
            "metadata": encode_json(metadata),
            "modes": list(stream_modes),
            "configurable": encode_json(configurable or {}),
        },
    )


async def lg_run_record(
    conn: AsyncConnection[Any],
    request_id: str,
    *,
    metadata: dict[str, Any],
    strategy: str,
    stream_modes: Sequence[str],
) -> None:
    await call_scalar(
        conn,
        "SELECT yuxi.lg_run_record(p_request_id => %(request_id)s,"
        " p_metadata => %(metadata)s::jsonb, p_strategy => %(strategy)s,"
        " p_stream_modes => %(modes)s)",
        {
            "request_id": request_id,
            "metadata": encode_json(metadata),
            "strategy": strategy,
            "modes": list(stream_modes),
        },
    )


async def lg_thread_runs(
    conn: AsyncConnection[Any], uid: UUID, thread_id: UUID, request_id: str | None = None
) -> list[LgRun]:
    return await call_many(
        conn,
        LgRun,
        "yuxi.lg_thread_runs(p_uid => %(uid)s, p_thread_id => %(thread_id)s,"
        " p_request_id => %(request_id)s)",
        {"uid": uid, "thread_id": thread_id, "request_id": request_id},
    )


class LgAssistant(msgspec.Struct, frozen=True):
    """A row of ``yuxi.lg_assistants``: a live, non-subagent agent the caller may see."""

    slug: str
    name: str
    description: str
    backend_id: str
    config_json: dict[str, Any]
    metadata: dict[str, Any]
    version: int
    created_at: datetime
    updated_at: datetime


async def lg_assistants(
    conn: AsyncConnection[Any], uid: UUID, slug: str | None = None
) -> list[LgAssistant]:
    """The caller's assistants by slug, or the one named ``slug`` (none if not visible)."""
    return await call_many(
        conn,
        LgAssistant,
        "yuxi.lg_assistants(p_uid => %(uid)s, p_slug => %(slug)s)",
        {"uid": uid, "slug": slug},
    )


async def lg_thread_state_lock(conn: AsyncConnection[Any], uid: UUID, thread_id: UUID) -> None:
    """Locks the caller's idle thread until the transaction ends (run_busy, run_interrupted
    otherwise); a run submitted meanwhile waits and starts from the changed state."""
    await call_scalar(
        conn,
        "SELECT thread_id FROM yuxi.lg_thread_state_lock(p_uid => %(uid)s,"
        " p_thread_id => %(thread_id)s)",
        {"uid": uid, "thread_id": thread_id},
    )


async def lg_thread_state_update(
    conn: AsyncConnection[Any], uid: UUID, thread_id: UUID, messages: list[dict[str, Any]]
) -> int:
    """Appends ``messages`` (``{role, content, metadata?}``) to the thread's history
    under its state lock; returns how many were stored."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.lg_thread_state_update(p_uid => %(uid)s, p_thread_id => %(thread_id)s,"
        " p_messages => %(messages)s::jsonb)",
        {"uid": uid, "thread_id": thread_id, "messages": encode_json(messages)},
    )
    return int(value)


async def lg_thread_copy(
    conn: AsyncConnection[Any], uid: UUID, thread_id: UUID, new_thread_id: UUID
) -> UUID:
    value = await call_scalar(
        conn,
        "SELECT yuxi.lg_thread_copy(p_uid => %(uid)s, p_thread_id => %(thread_id)s,"
        " p_new_thread_id => %(new)s)",
        {"uid": uid, "thread_id": thread_id, "new": new_thread_id},
    )
    return UUID(str(value))


async def lg_run_delete(
    conn: AsyncConnection[Any], uid: UUID, thread_id: UUID, request_id: str
) -> None:
    await call_scalar(
        conn,
        "SELECT yuxi.lg_run_delete(p_uid => %(uid)s, p_thread_id => %(thread_id)s,"
        " p_request_id => %(request_id)s)",
        {"uid": uid, "thread_id": thread_id, "request_id": request_id},
    )
