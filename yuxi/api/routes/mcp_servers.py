"""MCP servers: a user's own HTTP servers, and platform servers (admins) shared like
agents. Headers and env go in, sealed at once under the server key; they never come
out (``header_names`` and ``env_names`` say which are set). A server's tools are
discovered by a worker (the API never opens the secrets, nor runs a stdio command)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from litestar import Controller, delete, get, patch, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, FromQuery, JSONBody
from psycopg import AsyncConnection

from yuxi.api.auth import User
from yuxi.api.bodies import Body
from yuxi.api.dependencies import caller_briefly
from yuxi.mcp.secrets import seal_map
from yuxi.queue.errors import InvalidInput
from yuxi.queue.mcp import (
    McpServerInfo,
    McpToolList,
    Sealed,
    mcp_server_create,
    mcp_server_delete,
    mcp_server_get,
    mcp_server_list,
    mcp_server_update,
    mcp_tools_get,
    mcp_tools_request,
)

Conn = NamedDependency[AsyncConnection[Any]]

Slug = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$", max_length=40)]
Timeout = Annotated[float, msgspec.Meta(gt=0, le=3600)]
# a discovery is asked again once the list is this old
TOOLS_MAX_AGE_SECONDS = 30.0
# how long GET .../tools waits for a worker's discovery before answering "pending"
TOOLS_WAIT_SECONDS = 20.0


class McpServerBody(Body):
    """A server to register (``slug``, ``name``, ``transport`` and ``url`` or ``command``)
    or the fields to change (only those sent). ``headers``/``env`` sent replace the
    stored ones whole (``{}`` or ``null`` removes them)."""

    slug: Slug | msgspec.UnsetType = msgspec.UNSET
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | msgspec.UnsetType = (
        msgspec.UNSET
    )
    transport: Literal["streamable_http", "sse", "stdio"] | msgspec.UnsetType = msgspec.UNSET
    url: (
        Annotated[str, msgspec.Meta(pattern=r"^https?://\S+$", max_length=2000)]
        | msgspec.UnsetType
        | None
    ) = msgspec.UNSET
    command: str | msgspec.UnsetType | None = msgspec.UNSET
    args: list[str] | msgspec.UnsetType = msgspec.UNSET
    headers: dict[str, str] | msgspec.UnsetType | None = msgspec.UNSET
    env: dict[str, str] | msgspec.UnsetType | None = msgspec.UNSET
    share_scope: Literal["owner", "all", "admins", "selected"] | msgspec.UnsetType = msgspec.UNSET
    shared_with: list[UUID] | msgspec.UnsetType = msgspec.UNSET
    enabled: bool | msgspec.UnsetType = msgspec.UNSET
    connect_timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=120)] | msgspec.UnsetType = (
        msgspec.UNSET
    )
    call_timeout_seconds: Timeout | msgspec.UnsetType = msgspec.UNSET

    def fields(self) -> dict[str, Any]:
        """The registry fields sent (not headers, env or shares), as ``p_fields``."""
        secret = {"headers", "env", "shared_with"}
        return {
            f: getattr(self, f)
            for f in self.__struct_fields__
            if f not in secret and getattr(self, f) is not msgspec.UNSET
        }


def _sealed(state: State, server_id: UUID, kind: str, values: object) -> Sealed | None:
    if values is msgspec.UNSET:
        return None
    return seal_map(state.yuxi.secrets, server_id, kind, values or {})  # type: ignore[arg-type]


def _shares(body: McpServerBody) -> list[UUID] | None:
    return None if body.shared_with is msgspec.UNSET else list(body.shared_with)


class McpServersController(Controller):
    path = "/api/mcp-servers"
    tags = ("mcp",)

    @get("/", summary="The MCP servers the caller sees: their own, then shared ones, by slug")
    async def list_servers(self, conn: Conn, user: NamedDependency[User]) -> list[McpServerInfo]:
        return await mcp_server_list(conn, user.uid)

    @post("/", summary="Register an MCP server (stdio and shared ones: admins)")
    async def create(
        self, state: State, conn: Conn, user: NamedDependency[User], data: JSONBody[McpServerBody]
    ) -> McpServerInfo:
        fields = data.fields()
        if not {"slug", "name", "transport"} <= fields.keys():
            raise InvalidInput("an MCP server needs slug, name and transport")
        server_id = uuid.uuid4()
        return await mcp_server_create(
            conn,
            server_id,
            user.uid,
            fields,
            shared_with=_shares(data),
            headers=_sealed(state, server_id, "headers", data.headers),
            env=_sealed(state, server_id, "env", data.env),
        )

    @get("/{slug:str}", summary="An MCP server (never its headers or env)")
    async def get_one(
        self, conn: Conn, user: NamedDependency[User], slug: FromPath[str]
    ) -> McpServerInfo:
        return await mcp_server_get(conn, user.uid, slug)

    @patch("/{slug:str}", summary="Change an MCP server (a platform one: admins)")
    async def change(
        self,
        state: State,
        conn: Conn,
        user: NamedDependency[User],
        slug: FromPath[str],
        data: JSONBody[McpServerBody],
    ) -> McpServerInfo:
        # the secrets are sealed bound to the row they go into
        server_id = (await mcp_server_get(conn, user.uid, slug)).id
        return await mcp_server_update(
            conn,
            user.uid,
            slug,
            data.fields(),
            shared_with=_shares(data),
            headers=_sealed(state, server_id, "headers", data.headers),
            env=_sealed(state, server_id, "env", data.env),
        )

    @delete("/{slug:str}", summary="Remove an MCP server (a platform one: admins)")
    async def remove(self, conn: Conn, user: NamedDependency[User], slug: FromPath[str]) -> None:
        await mcp_server_delete(conn, user.uid, slug)

    @get(
        "/{slug:str}/tools",
        summary="The tools a worker discovered on the server",
        dependencies={"user": Provide(caller_briefly)},
    )
    async def tools(
        self,
        state: State,
        user: NamedDependency[User],
        slug: FromPath[str],
        refresh: FromQuery[bool] = False,
    ) -> McpToolList:
        """Discovered within the last 30 s (``refresh=true``: now), or asked of a worker
        and waited for up to 20 s; ``pending`` when no worker answered yet, ``error``
        when the server could not be reached. No pooled connection is held between the
        reads of the wait."""
        pool = state.yuxi.pool
        age = 0.0 if refresh else TOOLS_MAX_AGE_SECONDS
        async with pool.connection() as conn:
            listed = await mcp_tools_request(conn, user.uid, slug, max_age_seconds=age)
        deadline = time.monotonic() + TOOLS_WAIT_SECONDS
        while listed.pending and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            async with pool.connection() as conn:
                listed = await mcp_tools_get(conn, user.uid, slug)
        return listed
