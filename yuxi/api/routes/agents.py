"""Agents: everyone sees the agents shared with them; admins create and update them."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, get, patch, post, put
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.exceptions import ValidationException
from litestar.params import FromPath, JSONBody
from psycopg import AsyncConnection

from yuxi.agents.config import AgentConfigError, check_agent_config
from yuxi.agents.registry import UnknownBackend, get_backend
from yuxi.api.auth import User, require_admin
from yuxi.api.bodies import Body
from yuxi.queue.agents import (
    AgentSettings,
    NewAgent,
    VisibleAgent,
    agent_save,
    agent_set_config,
    agents_visible,
)
from yuxi.queue.errors import InvalidInput, NotFound
from yuxi.resources import RESOURCE_KINDS

Conn = NamedDependency[AsyncConnection[Any]]


# the names the API's routes and OpenAPI schema use
SaveAgent = AgentSettings
CreateAgent = NewAgent


class AgentSummary(msgspec.Struct, frozen=True):
    id: str
    name: str
    description: str
    backend_id: str
    is_subagent: bool


class PatchAgent(Body):
    """Only the configuration: what the console's configuration form saves."""

    config: dict[str, Any]


class AgentDetail(msgspec.Struct, frozen=True):
    id: str
    name: str
    description: str
    backend_id: str
    is_subagent: bool
    share_scope: str
    capabilities: list[str]
    configurable_items: list[dict[str, Any]]
    config: dict[str, Any]


def _detail(row: VisibleAgent, options: dict[str, list[str]]) -> AgentDetail:
    try:
        backend = get_backend(row.backend_id)
        items = backend.context_schema.get_configurable_items(options)
        capabilities = list(backend.capabilities)
    except UnknownBackend:
        items, capabilities = [], []
    return AgentDetail(
        id=row.slug,
        name=row.name,
        description=row.description,
        backend_id=row.backend_id,
        is_subagent=row.is_subagent,
        share_scope=row.share_scope,
        capabilities=capabilities,
        configurable_items=items,
        config=row.config_json,
    )


class AgentsController(Controller):
    path = "/api/agents"
    tags = ("agents",)

    @get("/", summary="Agents visible to the caller")
    async def list_agents(self, conn: Conn, user: NamedDependency[User]) -> list[AgentSummary]:
        rows = await agents_visible(conn, user.uid)
        return [
            AgentSummary(
                id=r.slug,
                name=r.name,
                description=r.description,
                backend_id=r.backend_id,
                is_subagent=r.is_subagent,
            )
            for r in rows
        ]

    @get("/{slug:str}", summary="One agent with its configuration form and values")
    async def get_agent(
        self, state: State, conn: Conn, user: NamedDependency[User], slug: FromPath[str]
    ) -> AgentDetail:
        return await _visible(state, conn, user, slug)

    @post("/", summary="Create an agent (admins)")
    async def create_agent(
        self, state: State, conn: Conn, user: NamedDependency[User], data: JSONBody[CreateAgent]
    ) -> AgentDetail:
        require_admin(user)
        await _save(conn, data, data.slug, create=True)
        return await _visible(state, conn, user, data.slug)

    @put("/{slug:str}", summary="Replace an agent's settings (admins)")
    async def update_agent(
        self,
        state: State,
        conn: Conn,
        user: NamedDependency[User],
        slug: FromPath[str],
        data: JSONBody[SaveAgent],
    ) -> AgentDetail:
        require_admin(user)
        await _save(conn, data, slug, create=False)
        return await _visible(state, conn, user, slug)

    @patch("/{slug:str}", summary="Replace an agent's configuration only (admins)")
    async def set_agent_config(
        self,
        state: State,
        conn: Conn,
        user: NamedDependency[User],
        slug: FromPath[str],
        data: JSONBody[PatchAgent],
    ) -> AgentDetail:
        """What the console's form saves: ``config`` checked against the agent's backend,
        every other setting (name, sharing, retries) left as it is."""
        require_admin(user)
        current = await _visible(state, conn, user, slug)
        try:
            check_agent_config(get_backend(current.backend_id), data.config)
        except UnknownBackend as error:
            raise InvalidInput(str(error)) from None
        except AgentConfigError as error:
            raise InvalidInput(str(error)) from None
        await agent_set_config(conn, slug, data.config)
        return await _visible(state, conn, user, slug)


async def _visible(state: State, conn: AsyncConnection[Any], user: User, slug: str) -> AgentDetail:
    rows = await agents_visible(conn, user.uid)
    row = next((row for row in rows if row.slug == slug), None)
    if row is None:
        raise NotFound(f"agent {slug} not found")
    # the configuration form's choices: what this user may select for each resource field
    catalog = await state.yuxi.catalog.for_user(user.uid)  # one read for every kind
    options = {
        kind.context_field: await catalog.accessible(kind, user.uid) for kind in RESOURCE_KINDS
    }
    options["agents"] = [r.slug for r in rows if r.is_subagent]
    return _detail(row, options)


async def _save(conn: AsyncConnection[Any], data: SaveAgent, slug: str, *, create: bool) -> None:
    try:
        check_agent_config(get_backend(data.backend_id), data.config)
    except UnknownBackend as error:
        raise ValidationException(str(error)) from None
    except AgentConfigError as error:
        raise InvalidInput(str(error)) from None
    await agent_save(conn, slug, data, create=create)
