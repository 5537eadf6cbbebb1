"""Threads in bulk and as a whole: copy, count, prune, and the thread's stream (its
runs' streams, one after the other)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any
from uuid import UUID, uuid4

from litestar import Request, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.response import Stream
from psycopg import AsyncConnection

from yuxi.api.lg import access, follow
from yuxi.api.lg import state as lg_state
from yuxi.api.lg.errors import Refused
from yuxi.api.lg.threads import full_view, matching_threads
from yuxi.api.lg.views import run_ended
from yuxi.api.sse import HEADERS
from yuxi.api.state import AppState
from yuxi.queue.callers import User
from yuxi.queue.errors import InvalidInput
from yuxi.queue.lg import (
    lg_thread_copy,
    lg_thread_delete,
    lg_thread_runs,
    lg_thread_state_lock,
)

Conn = NamedDependency[AsyncConnection[Any]]
_PRUNE_STRATEGIES = ("delete", "keep_latest")


@post(
    "/threads/{thread_id:uuid}/copy",
    status_code=200,
    summary="Copy a thread: a new thread of the caller with its state, history and metadata",
    tags=["langgraph"],
)
async def copy_thread(
    state: State, conn: Conn, user: NamedDependency[User], thread_id: FromPath[UUID]
) -> dict[str, Any]:
    row = await access.thread(conn, user, thread_id)
    if row.agent_slug is None:
        raise Refused("copying a thread that never ran is not supported: create a new thread")
    new_id = uuid4()
    saver = await state.yuxi.checkpointer()
    # the source stays locked (nothing runs on it) until its checkpoints are copied
    async with conn.transaction():
        await lg_thread_copy(conn, user.uid, thread_id, new_id)
        await lg_state.copy_checkpoints(saver, str(thread_id), str(new_id))
    return await full_view(state, await access.thread(conn, user, new_id))


@post("/threads/count", status_code=200, summary="Count the caller's threads", tags=["langgraph"])
async def count_threads(
    conn: Conn, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> int:
    return len(await matching_threads(conn, user, data))


@post(
    "/threads/prune",
    status_code=200,
    summary="Delete threads, or keep only their latest checkpoint",
    tags=["langgraph"],
)
async def prune_threads(
    state: State, conn: Conn, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> dict[str, Any]:
    raw = data.get("thread_ids")
    if not isinstance(raw, list) or not all(isinstance(t, str) for t in raw):
        raise InvalidInput("thread_ids must be a list of thread ids")
    strategy = data.get("strategy") or "delete"
    if strategy not in _PRUNE_STRATEGIES:
        raise InvalidInput("strategy must be delete or keep_latest")
    try:
        ids = sorted({UUID(t) for t in raw})  # one lock order for every caller
    except ValueError:
        raise InvalidInput("thread_ids must be thread ids (UUIDs)") from None
    rows = [await access.thread(conn, user, t) for t in ids]  # 404 for anyone else's
    if strategy == "delete":
        async with conn.transaction():
            for t in ids:
                await lg_thread_delete(conn, user.uid, t)
        return {"pruned_count": len(ids)}
    bound = [r.thread_id for r in rows if r.agent_slug is not None]
    saver = await state.yuxi.checkpointer()
    async with conn.transaction():
        for t in bound:  # idle ones only: a run reads its earlier checkpoints
            await lg_thread_state_lock(conn, user.uid, t)
        try:
            await saver.aprune([str(t) for t in bound], strategy="keep_latest")
        except NotImplementedError as error:
            raise Refused(f"keep_latest cannot prune these threads: {error}") from None
    return {"pruned_count": len(ids)}


async def _thread_stream(app: AppState, uid: UUID, thread_id: UUID) -> AsyncIterator[bytes]:
    """Each run of the thread that has not ended, oldest first, streamed to its end in
    the stream modes it was created with; runs queued meanwhile follow. Ends when the
    thread has none left."""
    streamed: set[str] = set()
    while True:
        async with app.pool.connection() as conn:
            rows = await lg_thread_runs(conn, uid, thread_id)
        waiting = [r for r in reversed(rows) if not run_ended(r) and r.request_id not in streamed]
        if not waiting:
            return
        row = waiting[0]
        streamed.add(row.request_id)
        chosen = row.stream_modes or ["values"]
        async for part in follow.stream_run(app, uid, thread_id, row.request_id, chosen, 0, row):
            yield part
        if app.hub.closing:
            return


@get(
    "/threads/{thread_id:uuid}/stream",
    summary="Join a thread's stream: its runs that have not ended, one after the other",
    tags=["langgraph"],
)
async def join_thread_stream(
    state: State,
    conn: Conn,
    user: NamedDependency[User],
    request: Request[object, object, State],
    thread_id: FromPath[UUID],
    stream_mode: Annotated[list[str] | None, QueryParameter(description="run_modes")] = None,
) -> Stream:
    chosen = [m for m in stream_mode or [] if m] or ["run_modes"]
    if chosen != ["run_modes"]:
        raise Refused(
            "a thread's stream is its runs' streams (stream_mode run_modes); lifecycle and"
            " state_update are not supported"
        )
    if request.headers.get("last-event-id"):
        raise Refused(
            "resuming a thread's stream is not supported: join a run's stream"
            " (runs.join_stream with last_event_id)"
        )
    await access.thread(conn, user, thread_id)  # 404 for anyone else's
    content = _thread_stream(state.yuxi, user.uid, thread_id)
    return Stream(content=content, media_type="text/event-stream", headers=dict(HEADERS))
