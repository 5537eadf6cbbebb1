"""Shared data for integration tests: users, agents, a project, and short helpers."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from tests.conftest import database_url
from yuxi.queue.requests import RequestInfo, request_submit
from yuxi.queue.runs import ClaimedRun, OutputMessage, Run, run_claim, run_finish
from yuxi.queue.threads import thread_create


@dataclass
class World:
    pool: AsyncConnectionPool
    url: str
    alice: UUID
    bob: UUID
    admin: UUID
    project: UUID

    async def thread(self, uid: UUID | None = None, agent: str = "chatbot") -> UUID:
        async with self.pool.connection() as conn:
            created = await thread_create(conn, uid=uid or self.alice, agent_slug=agent)
        return created.id

    async def submit(self, thread_id: UUID, query: str = "hello", **kwargs: Any) -> RequestInfo:
        kwargs.setdefault("uid", self.alice)
        async with self.pool.connection() as conn:
            return await request_submit(conn, thread_id=thread_id, query=query, **kwargs)

    async def claim(
        self, run_id: UUID, worker: str = "w1", lease: float = 30.0, **kw: Any
    ) -> ClaimedRun:
        async with self.pool.connection() as conn:
            return await run_claim(conn, run_id, worker=worker, lease_seconds=lease, **kw)

    async def complete(self, claimed: ClaimedRun, text: str = "done") -> Run:
        async with self.pool.connection() as conn:
            return await run_finish(
                conn,
                claimed.run_id,
                claimed.lease_token,
                status="completed",
                messages=[OutputMessage(role="assistant", content=text)],
            )

    async def finish(self, claimed: ClaimedRun, status: str, **kwargs: Any) -> Run:
        async with self.pool.connection() as conn:
            return await run_finish(
                conn, claimed.run_id, claimed.lease_token, status=status, **kwargs
            )

    async def fetch(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(query, params)  # type: ignore[arg-type]
            return await cur.fetchall()

    async def execute(self, query: str, *params: Any) -> int:
        """Runs a statement; returns the number of rows it touched."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(query, params)  # type: ignore[arg-type]
            return cur.rowcount

    async def value(self, query: str, *params: Any) -> Any:
        rows = await self.fetch(query, *params)
        return rows[0][0] if rows else None


@pytest.fixture
async def world(pool: AsyncConnectionPool, db_url: str) -> World:
    async with pool.connection() as conn:
        ids = {}
        for name, admin in (("alice", False), ("bob", False), ("admin", True)):
            cur = await conn.execute(
                "INSERT INTO yuxi.users (name, is_admin) VALUES (%s, %s) RETURNING id",
                (name, admin),
            )
            row = await cur.fetchone()
            assert row is not None
            ids[name] = row[0]
        await conn.execute(
            "INSERT INTO yuxi.agents (slug, name, backend_id, config_json) VALUES"
            " ('chatbot', 'Chatbot', 'chatbot',"
            '  \'{"context": {"model": "builtin:scripted"}}\'),'
            " ('private', 'Private', 'chatbot', '{\"context\": {}}'),"
            " ('helper', 'Helper', 'subagent', '{\"context\": {}}')"
        )
        await conn.execute("UPDATE yuxi.agents SET share_scope = 'selected' WHERE slug = 'private'")
        await conn.execute("UPDATE yuxi.agents SET is_subagent = true WHERE slug = 'helper'")
        await conn.execute(
            "INSERT INTO yuxi.agent_shares (agent_slug, uid) VALUES ('private', %s)",
            (ids["alice"],),
        )
        cur = await conn.execute(
            "INSERT INTO yuxi.projects (uid, name, workdir_path)"
            " VALUES (%s, 'p', '/tmp/p') RETURNING id",
            (ids["alice"],),
        )
        row = await cur.fetchone()
        assert row is not None
    return World(pool, db_url, ids["alice"], ids["bob"], ids["admin"], row[0])


@pytest.fixture
def new_database(pg_server_url: str) -> Iterator[Callable[[], str]]:
    """Makes databases with nothing in them (not cloned from the migrated template)."""
    names: list[str] = []

    def make() -> str:
        names.append(f"yuxi_clidb_{uuid.uuid4().hex[:10]}")
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(names[-1])))
        return database_url(pg_server_url, names[-1])

    try:
        yield make
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            for name in names:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
