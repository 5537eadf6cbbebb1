"""The tool discovery job (``discover_mcp_tools``, queue ``yuxi_mcp``): a worker opens a
server's secrets, connects, lists its tools and stores them (or the error met) for
``GET /api/mcp-servers/{slug}/tools``. The API never holds a server's secrets in the
clear, nor runs a stdio server's command."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from uuid import UUID

from psycopg_pool import AsyncConnectionPool

from yuxi.models.secret_box import SecretBox, SecretError
from yuxi.queue.mcp import mcp_server_connection, mcp_tools_store

log = logging.getLogger("yuxi.mcp")


async def discover_server_tools(
    pool: AsyncConnectionPool[Any], home: Path, server_id: UUID
) -> None:
    # FastMCP and langchain.mcp load with the first discovery, not with the worker
    from yuxi.mcp.session import McpServerSpec, discover_tools

    async with pool.connection() as conn:
        row = await mcp_server_connection(conn, server_id)
    if row is None:
        return  # deleted meanwhile
    try:
        spec = McpServerSpec.opened(SecretBox.from_env(home), row)
    except SecretError as error:
        tools: list[dict[str, Any]] = []
        problem: str | None = f"the server's headers or env cannot be opened: {error}"
    else:
        tools, problem = await discover_tools(spec)
    async with pool.connection() as conn:
        stored = await mcp_tools_store(conn, row.id, row.updated_at, tools, problem)
    log.info(
        "MCP server %s: %s%s",
        row.slug,
        f"{len(tools)} tools" if problem is None else problem,
        "" if stored else " (changed since; not stored)",
    )
