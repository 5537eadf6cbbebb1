"""A thread's state at a checkpoint (``threads.get_state(checkpoint=…)``,
``RemoteGraph.get_state``) and ``threads.update_state`` (yuxi.api.lg.state_update)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from litestar import get, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from psycopg import AsyncConnection

from yuxi.api.lg import access
from yuxi.api.lg import state as lg_state
from yuxi.api.lg.errors import Refused
from yuxi.api.lg.state_update import update_state
from yuxi.queue.agents import agents_visible
from yuxi.queue.callers import User
from yuxi.queue.errors import InvalidInput, NotFound

Conn = NamedDependency[AsyncConnection[Any]]


async def _state_at(
    state: State, conn: AsyncConnection[Any], user: User, thread_id: UUID, checkpoint_id: str | None
) -> dict[str, Any]:
    row = await access.thread(conn, user, thread_id)
    if row.agent_slug is None:
        if checkpoint_id is not None:
            raise NotFound(f"checkpoint {checkpoint_id} not found")
        return lg_state.state_view(None, str(thread_id), interrupted=False)
    saver = await state.yuxi.checkpointer()
    saved = await lg_state.at(saver, str(thread_id), checkpoint_id)
    if saved is None and checkpoint_id is not None:
        raise NotFound(f"checkpoint {checkpoint_id} not found")
    # a pending interrupt is a question only on the head of an interrupted thread
    interrupted = row.queue_status == "interrupted" and (
        checkpoint_id is None or checkpoint_id == await lg_state.head_id(saver, str(thread_id))
    )
    return lg_state.state_view(saved, str(thread_id), interrupted=interrupted)


@post(
    "/threads/{thread_id:uuid}/state/checkpoint",
    status_code=200,
    summary="A thread's state at a checkpoint",
    tags=["langgraph"],
)
async def state_at_checkpoint(
    state: State,
    conn: Conn,
    user: NamedDependency[User],
    thread_id: FromPath[UUID],
    data: JSONBody[dict[str, Any]],
) -> dict[str, Any]:
    # ``subgraphs``: a yuxi graph has none (a subagent is a run of its own)
    checkpoint_id = lg_state.checkpoint_id_of(str(thread_id), data.get("checkpoint") or {})
    return await _state_at(state, conn, user, thread_id, checkpoint_id)


@get(
    "/threads/{thread_id:uuid}/state/{checkpoint_id:str}",
    summary="A thread's state at a checkpoint",
    tags=["langgraph"],
)
async def state_at_checkpoint_id(
    state: State,
    conn: Conn,
    user: NamedDependency[User],
    thread_id: FromPath[UUID],
    checkpoint_id: FromPath[str],
) -> dict[str, Any]:
    return await _state_at(state, conn, user, thread_id, checkpoint_id)


@post(
    "/threads/{thread_id:uuid}/state",
    status_code=200,
    summary="Update a thread's state (a new latest checkpoint; its messages join the history)",
    tags=["langgraph"],
)
async def post_state(
    state: State,
    conn: Conn,
    user: NamedDependency[User],
    thread_id: FromPath[UUID],
    data: JSONBody[dict[str, Any]],
) -> dict[str, Any]:
    values = data.get("values")
    if values is None:
        values = {}
    if isinstance(values, list):
        raise Refused("several updates in one update_state are not supported: send one object")
    if not isinstance(values, dict):
        raise InvalidInput("values must be an object")
    as_node = data.get("as_node")
    if as_node is not None and not isinstance(as_node, str):
        raise InvalidInput("as_node must be a node name")
    checkpoint_id = lg_state.checkpoint_id_of(str(thread_id), data.get("checkpoint"))
    legacy = data.get("checkpoint_id")
    if legacy is not None:
        if not isinstance(legacy, str):
            raise InvalidInput("checkpoint_id must be a string")
        checkpoint_id = checkpoint_id or legacy
    row = await access.thread(conn, user, thread_id)
    if row.agent_slug is None:
        raise Refused(
            "this thread has no assistant yet, so no graph to update: run it once, or create"
            " it with metadata.graph_id"
        )
    agent = next(
        (a for a in await agents_visible(conn, user.uid) if a.slug == row.agent_slug), None
    )
    if agent is None:
        raise NotFound(f"thread {thread_id} not found")
    return await update_state(
        conn,
        await state.yuxi.checkpointer(),
        uid=user.uid,
        thread_id=thread_id,
        backend_id=agent.backend_id,
        values=values,
        as_node=as_node,
        checkpoint_id=checkpoint_id,
    )
