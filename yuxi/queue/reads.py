"""Reads for one user (the API's views): threads, history, requests, results, agents."""

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
from yuxi.queue.models import RequestInfo


class ThreadInfo(msgspec.Struct, frozen=True):
    id: UUID
    agent_id: str
    project_id: UUID | None
    title: str
    thread_status: str
    created_at: datetime
    updated_at: datetime


class RunSummary(msgspec.Struct, frozen=True):
    run_id: UUID
    request_id: str
    run_type: str
    created_by_run_id: UUID | None
    status: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class RunResultRow(msgspec.Struct, frozen=True):
    status: str
    output: str | None
    final_message_id: int | None
    error_type: str | None
    error_message: str | None


class EventRow(msgspec.Struct, frozen=True):
    seq: int
    event: str
    payload: dict[str, Any]
    created_at: datetime


class AgentRow(msgspec.Struct, frozen=True):
    slug: str
    name: str
    description: str
    backend_id: str
    config_json: dict[str, Any]
    share_scope: str
    is_subagent: bool
    updated_at: datetime


class ProjectRow(msgspec.Struct, frozen=True):
    id: UUID
    name: str
    workdir_path: str
    created_at: datetime


def _p(uid: UUID, thread_id: UUID) -> dict[str, Any]:
    return {"u": uid, "t": thread_id}


async def get_thread(conn: AsyncConnection[Any], uid: UUID, thread_id: UUID) -> ThreadInfo:
    return await call_one(conn, ThreadInfo, "yuxi.thread_get(%(u)s, %(t)s)", _p(uid, thread_id))


async def list_threads(conn: AsyncConnection[Any], uid: UUID) -> list[ThreadInfo]:
    return await call_many(conn, ThreadInfo, "yuxi.thread_list(%(u)s)", {"u": uid})


async def create_thread_info(
    conn: AsyncConnection[Any], uid: UUID, agent_slug: str, project_id: UUID | None, title: str
) -> ThreadInfo:
    return await call_one(
        conn,
        ThreadInfo,
        "yuxi.thread_info_of(yuxi.thread_create(%(u)s, %(a)s, %(p)s, %(t)s))",
        {"u": uid, "a": agent_slug, "p": project_id, "t": title},
    )


async def mark_viewed(conn: AsyncConnection[Any], uid: UUID, thread_id: UUID) -> ThreadInfo:
    return await call_one(
        conn, ThreadInfo, "yuxi.thread_mark_viewed(%(u)s, %(t)s)", _p(uid, thread_id)
    )


async def delete_thread(conn: AsyncConnection[Any], uid: UUID, thread_id: UUID) -> None:
    await call_scalar(conn, "SELECT yuxi.thread_delete(%(u)s, %(t)s)", _p(uid, thread_id))


async def thread_runs(conn: AsyncConnection[Any], uid: UUID, thread_id: UUID) -> list[RunSummary]:
    return await call_many(conn, RunSummary, "yuxi.thread_runs(%(u)s, %(t)s)", _p(uid, thread_id))


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
    PostgreSQL from the rows' stored entries, all from one snapshot: the thread, then
    the runs' and the messages' entries in chunks as the server sends them.

    The first piece is read before anything is yielded, so an unknown thread raises
    ``NotFound`` at the first ``anext``. The connection is held until the last piece
    (or until the consumer stops and the generator is closed)."""
    async with pool.connection() as conn, conn.transaction():
        cur = conn.cursor()
        cur.adapters.register_loader("text", _Utf8Text)
        params = _p(uid, thread_id)
        with typed_errors():
            # one snapshot; sorting a long thread's entries stays in memory
            await cur.execute(
                "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY;"
                " SET LOCAL work_mem = '32MB'"
            )
            await cur.execute("SELECT yuxi.thread_json(yuxi.thread_get(%(u)s, %(t)s))", params)
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
    query = sql.SQL("SELECT entries FROM {}(%(u)s, %(t)s) ORDER BY chunk").format(sql.SQL(function))
    separator = b""
    with typed_errors():
        async for (entries,) in cur.stream(query, params):
            yield separator + entries
            separator = b","


async def thread_requests(
    conn: AsyncConnection[Any], uid: UUID, thread_id: UUID
) -> list[RequestInfo]:
    return await call_many(
        conn, RequestInfo, "yuxi.thread_requests(%(u)s, %(t)s)", _p(uid, thread_id)
    )


async def run_result(conn: AsyncConnection[Any], run_id: UUID, uid: UUID) -> RunResultRow:
    return await call_one(
        conn, RunResultRow, "yuxi.run_result(%(r)s, %(u)s)", {"r": run_id, "u": uid}
    )


async def run_manifest(
    conn: AsyncConnection[Any], run_id: UUID, uid: UUID
) -> dict[str, Any] | None:
    value = await call_scalar(
        conn, "SELECT (yuxi.run_get(%(r)s, %(u)s)).manifest", {"r": run_id, "u": uid}
    )
    return value if isinstance(value, dict) else None


async def events_after(
    conn: AsyncConnection[Any], run_id: UUID, after: int, limit: int = 1000
) -> list[EventRow]:
    return await call_many(
        conn,
        EventRow,
        "yuxi.run_events_after(%(r)s, %(a)s, %(l)s)",
        {"r": run_id, "a": after, "l": limit},
    )


async def end_event(conn: AsyncConnection[Any], run_id: UUID) -> EventRow | None:
    rows = await call_many(conn, EventRow, "yuxi.run_end_event(%(r)s)", {"r": run_id})
    return rows[0] if rows else None


async def visible_agents(conn: AsyncConnection[Any], uid: UUID) -> list[AgentRow]:
    return await call_many(conn, AgentRow, "yuxi.agents_visible(%(u)s)", {"u": uid})


async def create_project(
    conn: AsyncConnection[Any], uid: UUID, name: str, workdir_path: str
) -> ProjectRow:
    return await call_one(
        conn,
        ProjectRow,
        "yuxi.project_create(%(u)s, %(n)s, %(w)s)",
        {"u": uid, "n": name, "w": workdir_path},
    )


async def list_projects(conn: AsyncConnection[Any], uid: UUID) -> list[ProjectRow]:
    return await call_many(
        conn,
        ProjectRow,
        "yuxi.projects WHERE uid = %(u)s AND deleted_at IS NULL ORDER BY created_at, id",
        {"u": uid},
    )
