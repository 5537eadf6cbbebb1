"""Agents (``yuxi.agent_*``, ``yuxi.agents_visible``): who may see which, and saving one."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.calls import call_many, call_scalar, encode_json


class AgentSettings(msgspec.Struct, forbid_unknown_fields=True):
    """Every setting of an agent, as ``yuxi.agent_save`` stores it (the body of
    ``PUT /api/agents/{slug}``)."""

    name: str
    backend_id: str
    description: str = ""
    config: dict[str, Any] = msgspec.field(default_factory=lambda: {"context": {}})
    share_scope: Literal["all", "admins", "selected"] = "all"
    shared_with: list[UUID] = msgspec.field(default_factory=list)
    is_subagent: bool = False
    max_run_attempts: Annotated[int, msgspec.Meta(ge=1, le=10)] = 1


class NewAgent(AgentSettings):
    """An agent's settings with its slug (the body of ``POST /api/agents``, and the
    agent file of ``yuxi agent create``)."""

    slug: str = ""


class VisibleAgent(msgspec.Struct, frozen=True):
    """A row of ``yuxi.agents_visible``."""

    slug: str
    name: str
    description: str
    backend_id: str
    config_json: dict[str, Any]
    share_scope: str
    is_subagent: bool
    updated_at: datetime


class AgentListing(msgspec.Struct, frozen=True):
    """A row of ``yuxi.agent_list()``."""

    slug: str
    name: str
    description: str
    backend_id: str
    config_json: dict[str, Any]
    share_scope: str
    shared_with: list[UUID]
    shared_with_names: list[str]
    is_subagent: bool
    max_run_attempts: int
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None


async def agents_visible(conn: AsyncConnection[Any], uid: UUID) -> list[VisibleAgent]:
    """The live agents ``uid`` may see, by slug."""
    return await call_many(
        conn, VisibleAgent, "yuxi.agents_visible(p_uid => %(uid)s)", {"uid": uid}
    )


async def agent_list(conn: AsyncConnection[Any]) -> list[AgentListing]:
    """Every agent, deleted ones included, by slug."""
    return await call_many(conn, AgentListing, "yuxi.agent_list()", {})


async def agent_save(
    conn: AsyncConnection[Any], slug: str, settings: AgentSettings, *, create: bool
) -> None:
    """Creates the agent (``AgentExists`` if the slug is taken) or replaces every setting
    of a live one (``NotFound`` otherwise). The API's agent routes and the CLI both save
    through here."""
    await call_scalar(
        conn,
        "SELECT yuxi.agent_save(p_create => %(create)s, p_slug => %(slug)s,"
        " p_name => %(name)s, p_description => %(description)s,"
        " p_backend_id => %(backend_id)s, p_config => %(config)s::jsonb,"
        " p_share_scope => %(share_scope)s, p_shared_with => %(shared_with)s::uuid[],"
        " p_is_subagent => %(is_subagent)s, p_max_run_attempts => %(max_run_attempts)s)",
        {
            "create": create,
            "slug": slug,
            "name": settings.name,
            "description": settings.description,
            "backend_id": settings.backend_id,
            "config": encode_json(settings.config),
            "share_scope": settings.share_scope,
            "shared_with": list(settings.shared_with),
            "is_subagent": settings.is_subagent,
            "max_run_attempts": settings.max_run_attempts,
        },
    )


async def agent_set_config(conn: AsyncConnection[Any], slug: str, config: dict[str, Any]) -> None:
    """Replaces a live agent's configuration and nothing else (``NotFound`` otherwise)."""
    await call_scalar(
        conn,
        "SELECT yuxi.agent_set_config(p_slug => %(slug)s, p_config => %(config)s::jsonb)",
        {"slug": slug, "config": encode_json(config)},
    )


async def agent_seed(
    conn: AsyncConnection[Any],
    slug: str,
    name: str,
    backend_id: str,
    config: dict[str, Any],
    description: str,
) -> bool:
    """Creates the agent unless one with ``slug`` exists; True when it was created."""
    created = await call_scalar(
        conn,
        "SELECT yuxi.agent_seed(p_slug => %(slug)s, p_name => %(name)s,"
        " p_backend_id => %(backend_id)s, p_config => %(config)s::jsonb,"
        " p_description => %(description)s)",
        {
            "slug": slug,
            "name": name,
            "backend_id": backend_id,
            "config": encode_json(config),
            "description": description,
        },
    )
    return bool(created)
