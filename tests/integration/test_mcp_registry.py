"""The MCP server registry's invariants in SQL, raced on real connections: one platform
server per slug, one per user and slug; a non-admin never holds a stdio or shared server,
whoever calls; a user sees one server per slug (their own first)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from psycopg import AsyncConnection

from tests.integration.conftest import World
from tests.integration.racing import race
from yuxi.queue.errors import McpServerExists, ReadOnly
from yuxi.queue.mcp import (
    mcp_server_connections,
    mcp_server_create,
    mcp_server_update,
    mcp_tools_request,
)

HTTP = {"name": "Search", "transport": "streamable_http", "url": "http://127.0.0.1:9/mcp"}


async def test_concurrent_registrations_of_one_slug_leave_one_server(
    world: World, db_url: str
) -> None:
    async def register(conn: AsyncConnection[Any], i: int) -> Any:
        fields = {**HTTP, "slug": "search", "share_scope": "all"}
        return await mcp_server_create(conn, uuid.uuid4(), world.admin, fields)

    results = await race(db_url, 8, register)
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert all(isinstance(r, McpServerExists) for r in results if isinstance(r, BaseException))

    async def own(conn: AsyncConnection[Any], i: int) -> Any:
        return await mcp_server_create(conn, uuid.uuid4(), world.alice, {**HTTP, "slug": "search"})

    results = await race(db_url, 8, own)
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    # alice's own shadows the platform's for her; bob sees the platform's
    async with world.pool.connection() as conn:
        [mine] = await mcp_server_connections(conn, world.alice)
        [platform] = await mcp_server_connections(conn, world.bob)
    assert mine.id != platform.id


async def test_a_non_admin_never_holds_a_stdio_or_shared_server(world: World) -> None:
    async with world.pool.connection() as conn:
        with pytest.raises(ReadOnly, match="only admins may register stdio"):
            await mcp_server_create(
                conn, uuid.uuid4(), world.alice,
                {"slug": "sh", "name": "sh", "transport": "stdio", "command": "sh"},
            )  # fmt: skip
        with pytest.raises(ReadOnly, match="only admins may register shared"):
            await mcp_server_create(
                conn, uuid.uuid4(), world.alice, {**HTTP, "slug": "s", "share_scope": "all"}
            )
        # nor by changing one of their own into one
        await mcp_server_create(conn, uuid.uuid4(), world.alice, {**HTTP, "slug": "mine"})
        with pytest.raises(ReadOnly):
            await mcp_server_update(
                conn, world.alice, "mine", {"transport": "stdio", "url": None, "command": "sh"}
            )


async def test_a_tool_list_request_defers_one_discovery_job(world: World) -> None:
    async with world.pool.connection() as conn:
        await mcp_server_create(conn, uuid.uuid4(), world.alice, {**HTTP, "slug": "mine"})
        first = await mcp_tools_request(conn, world.alice, "mine", max_age_seconds=30)
        again = await mcp_tools_request(conn, world.alice, "mine", max_age_seconds=30)
        cur = await conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE task_name = 'discover_mcp_tools'"
        )
        row = await cur.fetchone()
    assert first.pending and again.pending and row is not None and row[0] == 1
