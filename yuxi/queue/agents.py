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
    conn: AsyncConnection[Any],
    slug: str,
    settings: AgentSettings,
    *,
    create: bool,
    metadata: dict[str, Any] | None = None,
) -> None:
    """Creates the agent (``AgentExists`` if the slug is taken) or replaces every setting
    of a live one (``NotFound`` otherwise); ``metadata`` None keeps it (empty on create).
    The API's agent routes, the LangGraph API's assistants and the CLI save through here."""
    await call_scalar(
        conn,
        "SELECT yuxi.agent_save(p_create => %(create)s, p_slug => %(slug)s,"
        " p_name => %(name)s, p_description => %(description)s,"
        " p_backend_id => %(backend_id)s, p_config => %(config)s::jsonb,"
        " p_share_scope => %(share_scope)s, p_shared_with => %(shared_with)s::uuid[],"
        " p_is_subagent => %(is_subagent)s, p_max_run_attempts => %(max_run_attempts)s,"
        " p_metadata => %(metadata)s::jsonb)",
        {
            "metadata": None if metadata is None else encode_json(metadata),
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


async def agent_update(
    conn: AsyncConnection[Any],
    slug: str,
    *,
    name: str | None = None,
    description: str | None = None,
    backend_id: str | None = None,
    context: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> None:
    """Changes the given settings of a live agent and keeps the others: ``context``
    replaces ``config_json.context``, ``metadata`` is merged (``NotFound`` otherwise)."""
    await call_scalar(
        conn,
        "SELECT yuxi.agent_update(p_slug => %(slug)s, p_name => %(name)s,"
        " p_description => %(description)s, p_backend_id => %(backend_id)s,"
        " p_context => %(context)s::jsonb, p_metadata => %(metadata)s::jsonb)",
        {
            "slug": slug,
            "name": name,
            "description": description,
            "backend_id": backend_id,
            "context": None if context is None else encode_json(context),
            "metadata": None if metadata is None else encode_json(metadata),
        },
    )


async def agent_delete(conn: AsyncConnection[Any], slug: str) -> None:
    """Soft-deletes a live agent (``NotFound`` otherwise); its slug stays taken."""
    await call_scalar(conn, "SELECT yuxi.agent_delete(p_slug => %(slug)s)", {"slug": slug})


async def agent_set_version(conn: AsyncConnection[Any], slug: str, version: int) -> None:
    """Makes ``version`` the agent's current one (``NotFound`` for no such version)."""
    await call_scalar(
        conn,
        "SELECT yuxi.agent_set_version(p_slug => %(slug)s, p_version => %(version)s)",
        {"slug": slug, "version": version},
    )


class AgentVersion(msgspec.Struct, frozen=True):
    """A row of ``yuxi.agent_version_list``."""

    version: int
    name: str
    description: str
    backend_id: str
    config_json: dict[str, Any]
    metadata: dict[str, Any]
    created_at: datetime


async def agent_version_list(
    conn: AsyncConnection[Any], uid: UUID, slug: str
) -> list[AgentVersion]:
    """The versions of an agent ``uid`` may see, newest first (none otherwise)."""
    return await call_many(
        conn,
        AgentVersion,
        "yuxi.agent_version_list(p_uid => %(uid)s, p_slug => %(slug)s)",
        {"uid": uid, "slug": slug},
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
