"""Assistants: the caller's visible, non-subagent agents (assistant id = slug, graph id
= the agent's backend), created, changed and deleted by admins as on ``/api/agents``,
with the agent's history as versions; their schemas come from the Context's
configurable items."""

from __future__ import annotations

import uuid
from typing import Any

from litestar import delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody
from psycopg import AsyncConnection

from yuxi.agents.config import AgentConfigError, check_agent_config
from yuxi.agents.registry import UnknownBackend, get_backend
from yuxi.api.auth import require_admin
from yuxi.api.lg import access
from yuxi.api.lg.errors import Refused
from yuxi.api.lg.graph_schemas import graph_schemas
from yuxi.api.lg.views import assistant_version_view, assistant_view
from yuxi.queue.agents import (
    AgentSettings,
    agent_delete,
    agent_save,
    agent_set_version,
    agent_update,
    agent_version_list,
)
from yuxi.queue.callers import User
from yuxi.queue.errors import AgentExists, InvalidInput, NotFound
from yuxi.queue.lg import LgAssistant, lg_assistants

Conn = NamedDependency[AsyncConnection[Any]]
_TYPES = {"number": "number", "bool": "boolean"}
_LISTS = ("tools", "knowledges", "mcps", "skills", "agents")


def _property(item: dict[str, Any]) -> dict[str, Any]:
    kind = item.get("kind", "text")
    options = item.get("options")
    if kind in _LISTS:
        prop: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
        if options:
            prop["items"]["enum"] = list(options)
    else:
        prop = {"type": _TYPES.get(kind, "string")}
        if options:
            prop["enum"] = list(options)
    prop["title"] = item.get("name", item["key"])
    if item.get("description"):
        prop["description"] = item["description"]
    if "default" in item:
        prop["default"] = item["default"]
    return prop


def context_schema(items: list[dict[str, Any]]) -> dict[str, Any]:
    properties = {item["key"]: _property(item) for item in items}
    properties["tool_approval_mode"] = {
        "type": "string",
        "enum": ["auto", "ask"],
        "title": "Tool approval mode",
        "description": "ask: every tool call waits for an approve or reject decision",
    }
    return {"title": "Context", "type": "object", "properties": properties}


_MESSAGES = {
    "type": "object",
    "properties": {"messages": {"type": "array", "items": {"type": "object"}}},
}


def _matches(row: LgAssistant, data: dict[str, Any]) -> bool:
    graph_id, metadata, name = data.get("graph_id"), data.get("metadata") or {}, data.get("name")
    if not isinstance(metadata, dict):
        raise InvalidInput("metadata must be an object")
    if graph_id is not None and row.backend_id != graph_id:
        return False
    if name is not None and str(name).lower() not in row.name.lower():
        return False
    view = assistant_view(row)["metadata"]
    return all(view.get(k) == v for k, v in metadata.items())


@post("/assistants/search", status_code=200, summary="Search assistants", tags=["langgraph"])
async def search_assistants(
    conn: Conn, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> list[dict[str, Any]]:
    limit, offset = _page(data)
    found = [assistant_view(r) for r in await lg_assistants(conn, user.uid) if _matches(r, data)]
    return found[offset : offset + limit]


@post("/assistants/count", status_code=200, summary="Count assistants", tags=["langgraph"])
async def count_assistants(
    conn: Conn, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> int:
    return sum(1 for r in await lg_assistants(conn, user.uid) if _matches(r, data))


@get("/assistants/{assistant_id:str}", summary="An assistant", tags=["langgraph"])
async def get_assistant(
    conn: Conn, user: NamedDependency[User], assistant_id: FromPath[str]
) -> dict[str, Any]:
    return assistant_view(await access.assistant_row(conn, user, assistant_id))


def _object(data: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = data.get(key)
    if value is not None and not isinstance(value, dict):
        raise InvalidInput(f"{key} must be an object")
    return value


def _text(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidInput(f"{key} must be a string")
    return value


def _context(data: dict[str, Any]) -> dict[str, Any] | None:
    """The agent's context from a body's ``config.configurable`` and ``context`` (the
    latter wins); None when the body has neither. Other ``config`` keys are refused: an
    agent's settings are its context."""
    config, context = _object(data, "config"), _object(data, "context")
    configurable = None
    if config is not None:
        other = sorted(k for k, v in config.items() if k != "configurable" and v)
        if other:
            raise Refused(
                f"config.{other[0]}: an agent is configured by its context"
                " (config.configurable or context) only"
            )
        configurable = config.get("configurable")
        if configurable is not None and not isinstance(configurable, dict):
            raise InvalidInput("config.configurable must be an object")
    if configurable is None and context is None:
        return None
    return {**(configurable or {}), **(context or {})}


def _checked(backend_id: str, context: dict[str, Any]) -> None:
    """404 for an unknown graph (backend); 400 for a context it cannot load."""
    try:
        check_agent_config(get_backend(backend_id), {"context": context})
    except UnknownBackend:
        raise NotFound(f"graph {backend_id} not found") from None
    except AgentConfigError as error:
        raise InvalidInput(str(error)) from None


@post("/assistants", status_code=200, summary="Create an assistant (admins)", tags=["langgraph"])
async def create_assistant(
    conn: Conn, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> dict[str, Any]:
    """An agent of the backend ``graph_id``. ``if_exists: do_nothing`` answers an
    existing assistant the caller can see as it is (without an ``assistant_id``: the
    graph's own assistant, whose id is the graph id), to anyone; creating one is for
    admins, as on ``/api/agents``."""
    graph_id, if_exists = _text(data, "graph_id"), data.get("if_exists") or "raise"
    if not graph_id:
        raise InvalidInput("graph_id is required: the backend the assistant runs")
    if if_exists not in ("raise", "do_nothing"):
        raise InvalidInput("if_exists must be raise or do_nothing")
    assistant_id = _text(data, "assistant_id")
    metadata = _object(data, "metadata")
    context = _context(data)
    if if_exists == "do_nothing":
        existing = await lg_assistants(conn, user.uid, assistant_id or graph_id)
        if existing:
            return assistant_view(existing[0])
    require_admin(user, "create assistants")
    context = context or {}
    _checked(graph_id, context)
    slug = assistant_id or str(uuid.uuid4())
    settings = AgentSettings(
        name=_text(data, "name") or "Untitled",
        backend_id=graph_id,
        description=_text(data, "description") or "",
        config={"context": context},
    )
    try:
        await agent_save(conn, slug, settings, create=True, metadata=metadata or {})
    except AgentExists:
        # taken meanwhile (a concurrent create of the same id): do_nothing answers it
        existing = await lg_assistants(conn, user.uid, slug)
        if if_exists == "do_nothing" and existing:
            return assistant_view(existing[0])
        raise
    return assistant_view(await access.assistant_row(conn, user, slug))


@patch("/assistants/{assistant_id:str}", summary="Update an assistant (admins)", tags=["langgraph"])
async def update_assistant(
    conn: Conn,
    user: NamedDependency[User],
    assistant_id: FromPath[str],
    data: JSONBody[dict[str, Any]],
) -> dict[str, Any]:
    """Changes what the body names (a new version): ``graph_id`` (the backend),
    ``config.configurable`` / ``context`` (the agent's context, replaced), ``metadata``
    (merged), ``name``, ``description``."""
    current = await access.assistant_row(conn, user, assistant_id)
    require_admin(user, "change assistants")
    graph_id = _text(data, "graph_id")
    context = _context(data)
    metadata = _object(data, "metadata")
    if context is not None or (graph_id and graph_id != current.backend_id):
        _checked(
            graph_id or current.backend_id,
            context if context is not None else dict(current.config_json.get("context") or {}),
        )
    await agent_update(
        conn,
        assistant_id,
        name=_text(data, "name"),
        description=_text(data, "description"),
        backend_id=graph_id,
        context=context,
        metadata=metadata,
    )
    return assistant_view(await access.assistant_row(conn, user, assistant_id))


@delete(
    "/assistants/{assistant_id:str}", summary="Delete an assistant (admins)", tags=["langgraph"]
)
async def delete_assistant(
    conn: Conn,
    user: NamedDependency[User],
    assistant_id: FromPath[str],
    delete_threads: FromQuery[bool] = False,
) -> None:
    """Soft-deletes the agent (``yuxi.agent_delete``): its threads stay, and their runs
    fail from now on."""
    await access.assistant_row(conn, user, assistant_id)
    require_admin(user, "delete assistants")
    if delete_threads:
        raise Refused("delete_threads: an agent's threads are its users', never deleted with it")
    await agent_delete(conn, assistant_id)


@post(
    "/assistants/{assistant_id:str}/versions",
    status_code=200,
    summary="An assistant's versions, newest first",
    tags=["langgraph"],
)
async def assistant_versions(
    conn: Conn,
    user: NamedDependency[User],
    assistant_id: FromPath[str],
    data: JSONBody[dict[str, Any]],
) -> list[dict[str, Any]]:
    await access.assistant_row(conn, user, assistant_id)
    limit, offset = _page(data)
    metadata = _object(data, "metadata") or {}
    found = []
    for row in await agent_version_list(conn, user.uid, assistant_id):
        view = assistant_version_view(assistant_id, row)
        if all(view["metadata"].get(k) == v for k, v in metadata.items()):
            found.append(view)
    return found[offset : offset + limit]


@post(
    "/assistants/{assistant_id:str}/latest",
    status_code=200,
    summary="Make a version the assistant's current one (admins)",
    tags=["langgraph"],
)
async def set_latest_version(
    conn: Conn,
    user: NamedDependency[User],
    assistant_id: FromPath[str],
    data: JSONBody[dict[str, Any]],
) -> dict[str, Any]:
    current = await access.assistant_row(conn, user, assistant_id)
    require_admin(user, "change assistants")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidInput("version must be a positive integer")
    await agent_set_version(conn, current.slug, version)
    return assistant_view(await access.assistant_row(conn, user, assistant_id))


@get(
    "/assistants/{assistant_id:str}/schemas",
    summary="An assistant's schemas; context and config from its configurable items",
    tags=["langgraph"],
)
async def get_schemas(
    conn: Conn, user: NamedDependency[User], assistant_id: FromPath[str]
) -> dict[str, Any]:
    agent = await access.assistant(conn, user, assistant_id)
    schema = context_schema(access.configurable_items(agent))
    return {
        "graph_id": agent.backend_id,
        "input_schema": _MESSAGES,
        "output_schema": _MESSAGES,
        "state_schema": _MESSAGES,
        "config_schema": {
            "title": "Config",
            "type": "object",
            "properties": {"configurable": schema},
        },
        "context_schema": schema,
        # a langgraph.json project's graph: its own schemas
        **await graph_schemas(agent),
    }


def _page(data: dict[str, Any]) -> tuple[int, int]:
    limit, offset = data.get("limit", 10), data.get("offset", 0)
    if not isinstance(limit, int) or not isinstance(offset, int) or limit < 0 or offset < 0:
        raise InvalidInput("limit and offset must be non-negative integers")
    return min(limit, 1000), offset
