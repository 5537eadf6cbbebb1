"""Assistants: the caller's visible, non-subagent agents (assistant id = graph id =
slug), and their schemas from the Context's configurable items."""

from __future__ import annotations

from typing import Any

from litestar import get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from psycopg import AsyncConnection

from yuxi.api.lg import access
from yuxi.api.lg.graph_schemas import graph_schemas
from yuxi.api.lg.views import assistant_view
from yuxi.queue.callers import User
from yuxi.queue.errors import InvalidInput

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


@post("/assistants/search", status_code=200, summary="Search assistants", tags=["langgraph"])
async def search_assistants(
    conn: Conn, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> list[dict[str, Any]]:
    limit, offset = _page(data)
    graph_id, metadata = data.get("graph_id"), data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidInput("metadata must be an object")
    name = data.get("name")
    found = []
    for agent in await access.assistants(conn, user):
        view = assistant_view(agent)
        if graph_id is not None and agent.slug != graph_id:
            continue
        if name is not None and str(name).lower() not in agent.name.lower():
            continue
        if any(view["metadata"].get(k) != v for k, v in metadata.items()):
            continue
        found.append(view)
    return found[offset : offset + limit]


@get("/assistants/{assistant_id:str}", summary="An assistant", tags=["langgraph"])
async def get_assistant(
    conn: Conn, user: NamedDependency[User], assistant_id: FromPath[str]
) -> dict[str, Any]:
    return assistant_view(await access.assistant(conn, user, assistant_id))


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
        "graph_id": agent.slug,
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
