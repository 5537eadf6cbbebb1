"""Threads: conversations (and threads not yet bound to an agent), their state from the
checkpointer and its history."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from litestar import delete, get, patch, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, Parameter, QueryParameter
from psycopg import AsyncConnection

from yuxi.api.lg import access
from yuxi.api.lg import state as lg_state
from yuxi.api.lg.assistants import _page
from yuxi.api.lg.errors import Refused
from yuxi.api.lg.views import thread_metadata, thread_status, thread_view
from yuxi.queue.callers import User
from yuxi.queue.errors import InvalidInput
from yuxi.queue.lg import (
    LgThread,
    lg_thread_create,
    lg_thread_delete,
    lg_thread_list,
    lg_thread_patch,
)

Conn = NamedDependency[AsyncConnection[Any]]
_THREAD_STATUSES = ("idle", "busy", "interrupted", "error")


async def full_view(state: State, row: LgThread) -> dict[str, Any]:
    """The thread with its values and pending interrupts, read from its checkpoint."""
    if row.agent_slug is None:
        return thread_view(row)
    saved = await lg_state.head(await state.yuxi.checkpointer(), str(row.thread_id))
    interrupts = {}
    if row.queue_status == "interrupted" and saved is not None:
        found = lg_state.interrupts_of(saved)
        if found:
            interrupts = {str(saved.checkpoint["id"]): found}
    values = lg_state.values_of(saved)
    if interrupts:
        values = values | {"__interrupt__": next(iter(interrupts.values()))}
    return thread_view(row, values, interrupts)


@post("/threads", status_code=200, summary="Create a thread", tags=["langgraph"])
async def create_thread(
    state: State, conn: Conn, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> dict[str, Any]:
    if data.get("supersteps"):
        raise Refused("supersteps are not supported: a thread's state comes from its runs")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidInput("metadata must be an object")
    graph_id = metadata.get("graph_id") or metadata.get("assistant_id")
    if graph_id is not None:
        await access.assistant(conn, user, str(graph_id))
    raw_id = data.get("thread_id")
    try:
        thread_id = UUID(str(raw_id)) if raw_id else None
    except ValueError:
        raise InvalidInput("thread_id must be a UUID") from None
    if_exists = data.get("if_exists") or "raise"
    stored = {k: v for k, v in metadata.items() if k not in ("graph_id", "assistant_id")}
    async with conn.transaction():
        created = await lg_thread_create(
            conn,
            user.uid,
            thread_id=thread_id,
            metadata=stored,
            agent_slug=None if graph_id is None else str(graph_id),
            if_exists=if_exists,
        )
    return await full_view(state, await access.thread(conn, user, created))


@get("/threads/{thread_id:uuid}", summary="A thread", tags=["langgraph"])
async def get_thread(
    state: State, conn: Conn, user: NamedDependency[User], thread_id: FromPath[UUID]
) -> dict[str, Any]:
    return await full_view(state, await access.thread(conn, user, thread_id))


async def matching_threads(
    conn: AsyncConnection[Any], user: User, data: dict[str, Any]
) -> list[LgThread]:
    """The caller's threads that a search's (or count's) metadata, status and ids match."""
    if data.get("values"):
        raise Refused("searching threads by values is not supported; search by metadata")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidInput("metadata must be an object")
    status = data.get("status")
    if status is not None and status not in _THREAD_STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(_THREAD_STATUSES)}")
    raw_ids = data.get("ids") or []
    if not isinstance(raw_ids, list):
        raise InvalidInput("ids must be a list of thread ids")
    ids = {str(i) for i in raw_ids}
    rows = []
    for row in await lg_thread_list(conn, user.uid):
        shown = thread_metadata(row)
        if any(shown.get(k) != v for k, v in metadata.items()):
            continue
        if status is not None and thread_status(row) != status:
            continue
        if ids and str(row.thread_id) not in ids:
            continue
        rows.append(row)
    return rows


@post("/threads/search", status_code=200, summary="Search the caller's threads", tags=["langgraph"])
async def search_threads(
    state: State, conn: Conn, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> list[dict[str, Any]]:
    limit, offset = _page(data)
    rows = await matching_threads(conn, user, data)
    sort_by = data.get("sort_by") or "updated_at"
    if sort_by not in ("thread_id", "status", "created_at", "updated_at"):
        raise InvalidInput("sort_by must be thread_id, status, created_at or updated_at")
    descending = (data.get("sort_order") or "desc") == "desc"
    rows.sort(key=lambda r: str(getattr(r, sort_by, r.updated_at)), reverse=descending)
    return [await full_view(state, row) for row in rows[offset : offset + limit]]


@patch("/threads/{thread_id:uuid}", summary="Merge metadata into a thread", tags=["langgraph"])
async def patch_thread(
    state: State,
    conn: Conn,
    user: NamedDependency[User],
    thread_id: FromPath[UUID],
    data: JSONBody[dict[str, Any]],
) -> dict[str, Any]:
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidInput("metadata must be an object")
    if "graph_id" in metadata or "assistant_id" in metadata:
        raise Refused("a thread's graph_id is its agent and cannot change")
    await lg_thread_patch(conn, user.uid, thread_id, metadata)
    return await full_view(state, await access.thread(conn, user, thread_id))


@delete(
    "/threads/{thread_id:uuid}",
    summary="Delete a thread (its queue is cancelled)",
    tags=["langgraph"],
)
async def delete_thread(conn: Conn, user: NamedDependency[User], thread_id: FromPath[UUID]) -> None:
    await lg_thread_delete(conn, user.uid, thread_id)


@get("/threads/{thread_id:uuid}/state", summary="A thread's current state", tags=["langgraph"])
async def thread_state(
    state: State, conn: Conn, user: NamedDependency[User], thread_id: FromPath[UUID]
) -> dict[str, Any]:
    row = await access.thread(conn, user, thread_id)
    saved = None
    if row.agent_slug is not None:
        saved = await lg_state.head(await state.yuxi.checkpointer(), str(thread_id))
    return lg_state.state_view(saved, str(thread_id), interrupted=row.queue_status == "interrupted")


@get(
    "/threads/{thread_id:uuid}/history",
    summary="A thread's checkpoints, newest first",
    tags=["langgraph"],
)
async def thread_history_get(
    state: State,
    conn: Conn,
    user: NamedDependency[User],
    thread_id: FromPath[UUID],
    limit: Annotated[int, Parameter(ge=1, le=1000)] = 10,
    before: Annotated[str | None, QueryParameter(description="a checkpoint id")] = None,
) -> list[dict[str, Any]]:
    return await _history(state, conn, user, thread_id, limit, before)


@post(
    "/threads/{thread_id:uuid}/history",
    status_code=200,
    summary="A thread's checkpoints, newest first",
    tags=["langgraph"],
)
async def thread_history_post(
    state: State,
    conn: Conn,
    user: NamedDependency[User],
    thread_id: FromPath[UUID],
    data: JSONBody[dict[str, Any]],
) -> list[dict[str, Any]]:
    limit = data.get("limit", 10)
    if not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise InvalidInput("limit must be an integer from 1 to 1000")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidInput("metadata must be an object")
    checkpoint_id = lg_state.checkpoint_id_of(str(thread_id), data.get("checkpoint"))
    before = data.get("before")
    if isinstance(before, dict):
        before = lg_state.checkpoint_id_of(str(thread_id), before)
    elif before is not None and not isinstance(before, str):
        raise InvalidInput("before must be a checkpoint id or a checkpoint")
    return await _history(
        state, conn, user, thread_id, limit, before, checkpoint_id=checkpoint_id, metadata=metadata
    )


async def _history(
    state: State,
    conn: AsyncConnection[Any],
    user: User,
    thread_id: UUID,
    limit: int,
    before: str | None,
    *,
    checkpoint_id: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    row = await access.thread(conn, user, thread_id)
    if row.agent_slug is None:
        return []
    return await lg_state.history(
        await state.yuxi.checkpointer(),
        str(thread_id),
        limit=limit,
        before=None if before is None else str(before),
        interrupted=row.queue_status == "interrupted",
        checkpoint_id=checkpoint_id,
        metadata=metadata,
    )
