"""The MCP server registry (``yuxi.mcp_server_*``) and tool discovery (``yuxi.mcp_tools_*``).

Headers and env travel sealed (yuxi/models/secret_box.py); nothing here sees them in
the clear. ``McpServerInfo`` is what clients see (names of headers and env only);
``McpConnection`` is what a worker connects with.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.calls import call_many, call_one, call_scalar, encode_json


class McpServerInfo(msgspec.Struct, frozen=True):
    """A row of ``yuxi.mcp_server_info``: a server without its secrets."""

    id: UUID
    owner_uid: UUID | None
    slug: str
    name: str
    transport: str
    url: str | None
    command: str | None
    args: list[str]
    header_names: list[str]
    env_names: list[str]
    share_scope: str
    shared_with: list[UUID]
    enabled: bool
    connect_timeout_seconds: float
    call_timeout_seconds: float
    created_at: datetime
    updated_at: datetime


class McpConnection(msgspec.Struct, frozen=True):
    """A row of ``yuxi.mcp_server_connections``: what connecting needs (sealed)."""

    id: UUID
    slug: str
    name: str
    transport: str
    url: str | None
    command: str | None
    args: list[str]
    headers_sealed: bytes | None
    env_sealed: bytes | None
    connect_timeout_seconds: float
    call_timeout_seconds: float
    updated_at: datetime


class McpToolList(msgspec.Struct, frozen=True):
    """A row of ``yuxi.mcp_tool_list``."""

    slug: str
    tools: list[dict[str, Any]]
    error: str | None
    fetched_at: datetime | None
    pending: bool


class Sealed(msgspec.Struct, frozen=True):
    """Headers or env to store: their names and the sealed JSON object (None: none)."""

    names: list[str]
    sealed: bytes | None


async def mcp_server_create(
    conn: AsyncConnection[Any],
    server_id: UUID,
    uid: UUID,
    fields: dict[str, Any],
    *,
    shared_with: list[UUID] | None = None,
    headers: Sealed | None = None,
    env: Sealed | None = None,
) -> McpServerInfo:
    headers = headers or Sealed([], None)
    env = env or Sealed([], None)
    return await call_one(
        conn,
        McpServerInfo,
        "yuxi.mcp_server_create(p_id => %(id)s, p_uid => %(uid)s, p_fields => %(fields)s::jsonb,"
        " p_shared_with => %(shared)s::uuid[], p_header_names => %(hn)s::text[],"
        " p_headers_sealed => %(hs)s, p_env_names => %(en)s::text[], p_env_sealed => %(es)s)",
        {
            "id": server_id,
            "uid": uid,
            "fields": encode_json(fields),
            "shared": shared_with or [],
            "hn": headers.names,
            "hs": headers.sealed,
            "en": env.names,
            "es": env.sealed,
        },
    )


async def mcp_server_update(
    conn: AsyncConnection[Any],
    uid: UUID,
    slug: str,
    fields: dict[str, Any],
    *,
    shared_with: list[UUID] | None = None,
    headers: Sealed | None = None,
    env: Sealed | None = None,
) -> McpServerInfo:
    """Changes the fields present; ``headers``/``env`` given replace the stored ones."""
    return await call_one(
        conn,
        McpServerInfo,
        "yuxi.mcp_server_update(p_uid => %(uid)s, p_slug => %(slug)s,"
        " p_fields => %(fields)s::jsonb,"
        " p_shared_with => %(shared)s::uuid[], p_set_headers => %(sh)s,"
        " p_header_names => %(hn)s::text[], p_headers_sealed => %(hs)s, p_set_env => %(se)s,"
        " p_env_names => %(en)s::text[], p_env_sealed => %(es)s)",
        {
            "uid": uid,
            "slug": slug,
            "fields": encode_json(fields),
            "shared": shared_with,
            "sh": headers is not None,
            "hn": headers.names if headers else [],
            "hs": headers.sealed if headers else None,
            "se": env is not None,
            "en": env.names if env else [],
            "es": env.sealed if env else None,
        },
    )


async def mcp_server_delete(conn: AsyncConnection[Any], uid: UUID, slug: str) -> None:
    await call_scalar(
        conn,
        "SELECT yuxi.mcp_server_delete(p_uid => %(uid)s, p_slug => %(slug)s)",
        {"uid": uid, "slug": slug},
    )


async def mcp_server_get(conn: AsyncConnection[Any], uid: UUID, slug: str) -> McpServerInfo:
    return await call_one(
        conn,
        McpServerInfo,
        "yuxi.mcp_server_get(p_uid => %(uid)s, p_slug => %(slug)s)",
        {"uid": uid, "slug": slug},
    )


async def mcp_server_list(conn: AsyncConnection[Any], uid: UUID) -> list[McpServerInfo]:
    return await call_many(
        conn, McpServerInfo, "yuxi.mcp_server_list(p_uid => %(uid)s)", {"uid": uid}
    )


async def mcp_server_connections(
    conn: AsyncConnection[Any], uid: UUID, slugs: list[str] | None = None
) -> list[McpConnection]:
    """The enabled servers ``uid`` may use (of ``slugs``, or all), one per slug."""
    return await call_many(
        conn,
        McpConnection,
        "yuxi.mcp_server_connections(p_uid => %(uid)s, p_slugs => %(slugs)s::text[])",
        {"uid": uid, "slugs": slugs},
    )


async def mcp_server_connection(
    conn: AsyncConnection[Any], server_id: UUID
) -> McpConnection | None:
    rows = await call_many(
        conn, McpConnection, "yuxi.mcp_server_connection(p_id => %(id)s)", {"id": server_id}
    )
    return rows[0] if rows else None


async def mcp_tools_request(
    conn: AsyncConnection[Any], uid: UUID, slug: str, *, max_age_seconds: float
) -> McpToolList:
    """The discovered tools, asking a worker to discover them when older than the age."""
    return await call_one(
        conn,
        McpToolList,
        "yuxi.mcp_tools_request(p_uid => %(uid)s, p_slug => %(slug)s,"
        " p_max_age => make_interval(secs => %(age)s))",
        {"uid": uid, "slug": slug, "age": max_age_seconds},
    )


async def mcp_tools_get(conn: AsyncConnection[Any], uid: UUID, slug: str) -> McpToolList:
    return await call_one(
        conn,
        McpToolList,
        "yuxi.mcp_tools_get(p_uid => %(uid)s, p_slug => %(slug)s)",
        {"uid": uid, "slug": slug},
    )


async def mcp_tools_store(
    conn: AsyncConnection[Any],
    server_id: UUID,
    version: datetime,
    tools: list[dict[str, Any]],
    error: str | None,
) -> bool:
    return bool(
        await call_scalar(
            conn,
            "SELECT yuxi.mcp_tools_store(p_id => %(id)s, p_version => %(version)s,"
            " p_tools => %(tools)s::jsonb, p_error => %(error)s)",
            {"id": server_id, "version": version, "tools": encode_json(tools), "error": error},
        )
    )


async def mcp_server_sealed_secrets(
    conn: AsyncConnection[Any],
) -> list[tuple[UUID, str, bytes]]:
    """Every stored sealed secret as (server id, kind, sealed): the headers, then the env,
    each by server id (for ``yuxi mcp rekey``)."""
    cur = await conn.execute("SELECT id, kind, sealed FROM yuxi.mcp_server_sealed_secrets()")
    return [(row[0], row[1], bytes(row[2])) for row in await cur.fetchall()]


async def mcp_server_reseal(
    conn: AsyncConnection[Any], server_id: UUID, kind: str, old: bytes, new: bytes
) -> bool:
    """Replaces a server's sealed ``kind`` (``headers`` or ``env``) if it is still
    ``old`` (a concurrent change wins)."""
    return bool(
        await call_scalar(
            conn,
            "SELECT yuxi.mcp_server_reseal(p_id => %(id)s, p_kind => %(kind)s,"
            " p_old => %(old)s, p_new => %(new)s)",
            {"id": server_id, "kind": kind, "old": old, "new": new},
        )
    )
