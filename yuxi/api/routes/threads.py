"""Conversations: create, list, delete, history, viewed marker, agent state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from litestar import Controller, MediaType, delete, get, patch, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, JSONBody
from litestar.response import Stream
from psycopg import AsyncConnection

from yuxi.api.auth import User
from yuxi.api.bodies import Body
from yuxi.api.routes.files import file_entries
from yuxi.api.routes.runs import RunTiming
from yuxi.files.workdir import OUTPUTS
from yuxi.queue.files import thread_file_tree
from yuxi.queue.statuses import RunType
from yuxi.queue.threads import (
    Thread,
    thread_create,
    thread_delete,
    thread_history,
    thread_list,
    thread_mark_viewed,
    thread_rename,
    thread_runs,
    thread_subagent_runs,
)

Conn = NamedDependency[AsyncConnection[Any]]


class CreateThread(Body):
    agent_id: str
    project_id: UUID | None = None
    title: str = msgspec.field(default="")


class HistoryRun(msgspec.Struct, frozen=True):
    run_id: UUID
    request_id: str
    run_type: str
    created_by_run_id: UUID | None
    status: str
    timing: RunTiming


class HistoryMessage(msgspec.Struct, frozen=True):
    id: int
    role: str
    content: str
    run_id: UUID | None
    request_id: str | None
    delivery_status: str | None
    metadata: dict[str, Any]
    created_at: datetime


class History(msgspec.Struct, frozen=True):
    thread: Thread
    runs: list[HistoryRun]
    history: list[HistoryMessage]


class ThreadState(msgspec.Struct, frozen=True):
    agent_state: dict[str, Any]
    interrupt: dict[str, Any] | None


class RenameThread(Body):
    title: str


async def _after(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield first
    async for piece in rest:
        yield piece


class ThreadsController(Controller):
    path = "/api/chat"
    tags = ("threads",)

    @post("/thread", summary="Create a conversation with an agent the caller can see")
    async def create(
        self, conn: Conn, user: NamedDependency[User], data: JSONBody[CreateThread]
    ) -> Thread:
        return await thread_create(
            conn,
            uid=user.uid,
            agent_slug=data.agent_id,
            project_id=data.project_id,
            title=data.title,
        )

    @get("/threads", summary="The caller's conversations, most recently active first")
    async def list_threads(self, conn: Conn, user: NamedDependency[User]) -> list[Thread]:
        return await thread_list(conn, user.uid)

    @delete("/thread/{thread_id:uuid}", summary="Delete a conversation (its queue is cancelled)")
    async def remove(
        self, conn: Conn, user: NamedDependency[User], thread_id: FromPath[UUID]
    ) -> None:
        await thread_delete(conn, user.uid, thread_id)

    @patch("/thread/{thread_id:uuid}", summary="Rename a conversation (its title)")
    async def rename(
        self,
        conn: Conn,
        user: NamedDependency[User],
        thread_id: FromPath[UUID],
        data: JSONBody[RenameThread],
    ) -> Thread:
        return await thread_rename(conn, user.uid, thread_id, data.title)

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
        # read before the response starts, so an unknown one is still a 404. The stream
        # holds a connection of its own (one snapshot) until its last piece.
        pieces = thread_history(state.yuxi.pool, user.uid, thread_id)
        first = await anext(pieces)
        return Stream(_after(first, pieces), media_type=MediaType.JSON)

    @post("/thread/{thread_id:uuid}/viewed", status_code=200, summary="Mark the thread as seen")
    async def viewed(
        self, conn: Conn, user: NamedDependency[User], thread_id: FromPath[UUID]
    ) -> Thread:
        return await thread_mark_viewed(conn, user.uid, thread_id)

    @get("/thread/{thread_id:uuid}/state", summary="Agent state and the pending interrupt, if any")
    async def agent_state(
        self, state: State, conn: Conn, user: NamedDependency[User], thread_id: FromPath[UUID]
    ) -> ThreadState:
        tree = await thread_file_tree(conn, user.uid, thread_id)  # 404 for others
        runs = await thread_runs(conn, user.uid, thread_id)
        children = await thread_subagent_runs(conn, user.uid, thread_id)
        latest = next((r.status for r in reversed(runs) if r.run_type != RunType.SUBAGENT), None)
        from yuxi.runtime.state import read_thread_state  # LangGraph: on the first state read

        result = await read_thread_state(
            await state.yuxi.checkpointer(), str(thread_id), latest_run_status=latest
        )
        entries, _more = await file_entries(state.yuxi.files, tree)
        files = [msgspec.to_builtins(entry) for entry in entries]
        artifacts = [f for f in files if f["path"].startswith(f"{OUTPUTS}/")]
        agent_state = result.agent_state | {
            "files": files,
            "artifacts": artifacts,
            "subagent_runs": [msgspec.to_builtins(child) for child in children],
        }
        interrupt = None
        if result.interrupt is not None:
            interrupt = {"id": result.interrupt.id, "value": result.interrupt.value}
        return ThreadState(agent_state=agent_state, interrupt=interrupt)
