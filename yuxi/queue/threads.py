"""Conversations (``yuxi.thread_*``): the unit a queue belongs to, its runs, its
history and its queue's state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection, AsyncCursor, sql
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg_pool import AsyncConnectionPool

from yuxi.queue.calls import call_many, call_one, call_scalar
from yuxi.queue.errors import typed_errors
from yuxi.queue.requests import RequestInfo


class Thread(msgspec.Struct, frozen=True):
    """A conversation as its owner sees it (``yuxi.thread_info``)."""

    id: UUID
    agent_id: str
    project_id: UUID | None
    title: str
    thread_status: str
    created_at: datetime
    updated_at: datetime
    # relative to the user's workspace (threads/<id>, projects/<name>); None when the
    # project's directory lies outside it
    workdir: str | None


class ThreadRun(msgspec.Struct, frozen=True):
    """A row of ``yuxi.thread_runs``."""

    run_id: UUID
    request_id: str
    run_type: str
    created_by_run_id: UUID | None
    status: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class ThreadMessage(msgspec.Struct, frozen=True):
    """A row of ``yuxi.thread_messages``: a message of the thread, in order."""

    id: int
    role: str
    content: str
    run_id: UUID | None
    request_id: str | None
    delivery_status: str | None
    metadata: dict[str, Any]
    created_at: datetime


class SubagentRun(msgspec.Struct, frozen=True):
    """A row of ``yuxi.thread_subagent_runs``: a child run of the thread."""

    run_id: UUID
    agent_slug: str
    status: str
    created_by_run_id: UUID | None
    created_at: datetime
    finished_at: datetime | None
    error_message: str | None


class ThreadQueue(msgspec.Struct, frozen=True):
    """A row of the ``yuxi.thread_queues`` view."""

    thread_id: UUID
    uid: UUID
    status: str
    paused_reason: str | None
    blocking_run_id: UUID | None
    can_continue: bool
    queued_count: int
    last_run_id: UUID | None
    last_run_status: str | None


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


_OWNED = "(p_uid => %(uid)s, p_thread_id => %(thread_id)s)"


def _owned(uid: UUID, thread_id: UUID) -> dict[str, Any]:
    return {"uid": uid, "thread_id": thread_id}


async def thread_create(
    conn: AsyncConnection[Any],
    *,
    uid: UUID,
    agent_slug: str,
    project_id: UUID | None = None,
    title: str = "",
) -> Thread:
    """Creates a conversation bound to an agent the user can see (NotFound otherwise)."""
    return await call_one(
        conn,
        Thread,
        "yuxi.thread_info_of(yuxi.thread_create(p_uid => %(uid)s, p_agent_slug => %(agent)s,"
        " p_project_id => %(project_id)s, p_title => %(title)s))",
        {"uid": uid, "agent": agent_slug, "project_id": project_id, "title": title},
    )


async def thread_get(conn: AsyncConnection[Any], uid: UUID, thread_id: UUID) -> Thread:
    return await call_one(conn, Thread, "yuxi.thread_get" + _OWNED, _owned(uid, thread_id))


async def thread_list(conn: AsyncConnection[Any], uid: UUID) -> list[Thread]:
    """The user's live conversations, most recently active first."""
    return await call_many(conn, Thread, "yuxi.thread_list(p_uid => %(uid)s)", {"uid": uid})


async def thread_mark_viewed(conn: AsyncConnection[Any], uid: UUID, thread_id: UUID) -> Thread:
    return await call_one(conn, Thread, "yuxi.thread_mark_viewed" + _OWNED, _owned(uid, thread_id))


async def thread_rename(
    conn: AsyncConnection[Any], uid: UUID, thread_id: UUID, title: str
) -> Thread:
    """Sets the thread's title (at most 200 characters); nothing else changes."""
    return await call_one(
        conn,
        Thread,
        "yuxi.thread_rename(p_uid => %(uid)s, p_thread_id => %(thread_id)s, p_title => %(title)s)",
        {"uid": uid, "thread_id": thread_id, "title": title},
    )


async def thread_workdir(conn: AsyncConnection[Any], uid: UUID, thread_id: UUID) -> str | None:
    """The host path of the thread's project workdir, None for the default one
    (``<workspace>/threads/<thread_id>``). NotFound for a thread the user cannot see."""
    path = await call_scalar(conn, "SELECT yuxi.thread_workdir" + _OWNED, _owned(uid, thread_id))
    return None if path is None else str(path)


async def thread_subagent_runs(
    conn: AsyncConnection[Any], uid: UUID, thread_id: UUID
) -> list[SubagentRun]:
    return await call_many(
        conn, SubagentRun, "yuxi.thread_subagent_runs" + _OWNED, _owned(uid, thread_id)
    )


async def thread_delete(conn: AsyncConnection[Any], uid: UUID, thread_id: UUID) -> None:
    """Soft-deletes the conversation; its queue is cancelled."""
    await call_scalar(conn, "SELECT yuxi.thread_delete" + _OWNED, _owned(uid, thread_id))


async def thread_runs(conn: AsyncConnection[Any], uid: UUID, thread_id: UUID) -> list[ThreadRun]:
    return await call_many(conn, ThreadRun, "yuxi.thread_runs" + _OWNED, _owned(uid, thread_id))


async def thread_messages(
    conn: AsyncConnection[Any], uid: UUID, thread_id: UUID
) -> list[ThreadMessage]:
    """Every message of the user's thread, in order."""
    return await call_many(
        conn, ThreadMessage, "yuxi.thread_messages" + _OWNED, _owned(uid, thread_id)
    )


async def thread_requests(
    conn: AsyncConnection[Any], uid: UUID, thread_id: UUID
) -> list[RequestInfo]:
    return await call_many(
        conn, RequestInfo, "yuxi.thread_requests" + _OWNED, _owned(uid, thread_id)
    )


async def thread_continue(
    conn: AsyncConnection[Any], thread_id: UUID, *, uid: UUID | None = None
) -> UUID | None:
    """Resumes a paused backlog; returns the run dispatched (None for an empty queue)."""
    value = await call_scalar(
        conn,
        "SELECT yuxi.thread_continue(p_thread_id => %(thread_id)s, p_uid => %(uid)s)",
        {"thread_id": thread_id, "uid": uid},
    )
    return value if value is None else UUID(str(value))


async def thread_queue(conn: AsyncConnection[Any], thread_id: UUID) -> ThreadQueue | None:
    """The thread's row of ``yuxi.thread_queues`` (None for an unknown or deleted thread)."""
    rows = await call_many(
        conn,
        ThreadQueue,
        "yuxi.thread_queues WHERE thread_id = %(thread_id)s",
        {"thread_id": thread_id},
    )
    return rows[0] if rows else None


async def thread_queue_list(
    conn: AsyncConnection[Any], thread_id: UUID | None = None
) -> list[ThreadQueueListing]:
    """Threads that are not ``ready``; with ``thread_id``, that thread's row only."""
    return await call_many(
        conn,
        ThreadQueueListing,
        "yuxi.thread_queue_list(p_thread_id => %(thread_id)s)",
        {"thread_id": thread_id},
    )


async def thread_queue_requests(
    conn: AsyncConnection[Any], thread_id: UUID, *, include_finished: bool = False
) -> list[QueueRequest]:
    """A thread's requests in dispatch order: by default the active and queued ones."""
    return await call_many(
        conn,
        QueueRequest,
        "yuxi.thread_queue_requests(p_thread_id => %(thread_id)s, p_all => %(all)s)",
        {"thread_id": thread_id, "all": include_finished},
    )


class _Utf8Text(Loader):
    """A text value as UTF-8 bytes, not decoded into a str: for JSON sent on as it is."""

    def load(self, data: Buffer) -> bytes:
        raw = bytes(data)
        encoding = self.connection.info.encoding if self.connection else "utf-8"
        return raw if encoding == "utf-8" else raw.decode(encoding).encode()


async def thread_history(
    pool: AsyncConnectionPool[Any], uid: UUID, thread_id: UUID
) -> AsyncIterator[bytes]:
    """The history response ``{thread, runs, history}`` as JSON, in pieces, rendered by
    PostgreSQL from the rows' stored entries (``yuxi.thread_json``,
    ``yuxi.thread_history_runs``, ``yuxi.thread_history_messages``), all from one
    snapshot: the thread, then the runs' and the messages' entries in chunks as the
    server sends them.

    The first piece is read before anything is yielded, so an unknown thread raises
    ``NotFound`` at the first ``anext``. The connection is held until the last piece
    (or until the consumer stops and the generator is closed)."""
    async with pool.connection() as conn, conn.transaction():
        cur = conn.cursor()
        cur.adapters.register_loader("text", _Utf8Text)
        params = _owned(uid, thread_id)
        with typed_errors():
            # one snapshot; numbering a long thread's keys (the chunk starts) stays in memory
            await cur.execute(
                "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY;"
                " SET LOCAL work_mem = '32MB'"
            )
            await cur.execute("SELECT yuxi.thread_json(yuxi.thread_get" + _OWNED + ")", params)
            row = await cur.fetchone()
        assert row is not None
        yield b'{"thread":' + row[0] + b',"runs":['
        async for piece in _chunks(cur, "yuxi.thread_history_runs", params):
            yield piece
        yield b'],"history":['
        async for piece in _chunks(cur, "yuxi.thread_history_messages", params):
            yield piece
        yield b"]}"


async def _chunks(
    cur: AsyncCursor[Any], function: str, params: dict[str, Any]
) -> AsyncIterator[bytes]:
    """The comma-separated entries of one list, chunk by chunk, as the server sends them."""
    query = sql.SQL("SELECT entries FROM {}" + _OWNED + " ORDER BY chunk").format(sql.SQL(function))
    separator = b""
    with typed_errors():
        async for (entries,) in cur.stream(query, params):
            yield separator + entries
            separator = b","
