"""Conversations: create, list, delete, history, viewed marker, agent state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from uuid import UUID

from litestar import Controller, MediaType, delete, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, JSONBody
from litestar.response import Stream

from yuxi.api.auth import User
from yuxi.api.dto import (
    CreateThread,
    History,
    Thread,
    ThreadState,
)
from yuxi.queue import reads
from yuxi.queue.reads import ThreadInfo
from yuxi.runtime.state import read_thread_state


async def _after(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield first
    async for piece in rest:
        yield piece


def thread_view(info: ThreadInfo) -> Thread:
    return Thread(
        id=info.id,
        agent_id=info.agent_id,
        project_id=info.project_id,
        title=info.title,
        thread_status=info.thread_status,
        created_at=info.created_at,
        updated_at=info.updated_at,
    )


class ThreadsController(Controller):
    path = "/api/chat"
    tags = ("threads",)

    @post("/thread", summary="Create a conversation with an agent the caller can see")
    async def create(
        self, state: State, user: NamedDependency[User], data: JSONBody[CreateThread]
    ) -> Thread:
        async with state.yuxi.pool.connection() as conn:
            info = await reads.create_thread_info(
                conn, user.uid, data.agent_id, data.project_id, data.title
            )
        return thread_view(info)

    @get("/threads", summary="The caller's conversations, most recently active first")
    async def list_threads(self, state: State, user: NamedDependency[User]) -> list[Thread]:
        async with state.yuxi.pool.connection() as conn:
            return [thread_view(info) for info in await reads.list_threads(conn, user.uid)]

    @delete("/thread/{thread_id:uuid}", summary="Delete a conversation (its queue is cancelled)")
    async def remove(
        self, state: State, user: NamedDependency[User], thread_id: FromPath[UUID]
    ) -> None:
        async with state.yuxi.pool.connection() as conn:
            await reads.delete_thread(conn, user.uid, thread_id)

    @get(
        "/thread/{thread_id:uuid}/history",
        summary="The thread, all its runs, all its messages",
        responses={200: ResponseSpec(History, description="`{thread, runs, history}`")},
    )
    async def history(
        self, state: State, user: NamedDependency[User], thread_id: FromPath[UUID]
    ) -> Stream:
        # PostgreSQL renders the response from each row's stored entry and it is sent on
        # as it arrives, unparsed: what keeps a long thread's read fast. The thread is
        # read before the response starts, so an unknown one is still a 404.
        pieces = reads.thread_history(state.yuxi.pool, user.uid, thread_id)
        first = await anext(pieces)
        return Stream(_after(first, pieces), media_type=MediaType.JSON)

    @post("/thread/{thread_id:uuid}/viewed", status_code=200, summary="Mark the thread as seen")
    async def viewed(
        self, state: State, user: NamedDependency[User], thread_id: FromPath[UUID]
    ) -> Thread:
        async with state.yuxi.pool.connection() as conn:
            return thread_view(await reads.mark_viewed(conn, user.uid, thread_id))

    @get("/thread/{thread_id:uuid}/state", summary="Agent state and the pending interrupt, if any")
    async def agent_state(
        self, state: State, user: NamedDependency[User], thread_id: FromPath[UUID]
    ) -> ThreadState:
        async with state.yuxi.pool.connection() as conn:
            await reads.get_thread(conn, user.uid, thread_id)  # 404 for others
            runs = await reads.thread_runs(conn, user.uid, thread_id)
        latest = next((r.status for r in reversed(runs) if r.run_type != "subagent"), None)
        result = await read_thread_state(
            state.yuxi.checkpointer, str(thread_id), latest_run_status=latest
        )
        interrupt = None
        if result.interrupt is not None:
            interrupt = {"id": result.interrupt.id, "value": result.interrupt.value}
        return ThreadState(agent_state=result.agent_state, interrupt=interrupt)
