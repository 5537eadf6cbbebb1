"""An assistant's graph as LangGraph draws it (``get_graph(xray).to_json()``) and its
subgraphs' schemas (``aget_subgraphs``): the graph is built here, in the API, from the
agent's backend and stored context, the first call loading LangGraph (off the event
loop's thread) as the first state read does. Nothing runs: the graph is only drawn."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from litestar import get
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from psycopg import AsyncConnection

from yuxi.agents.registry import UnknownBackend, get_backend
from yuxi.api.lg import access
from yuxi.api.lg.errors import Refused
from yuxi.queue.callers import User
from yuxi.queue.errors import InvalidInput
from yuxi.queue.lg import LgAssistant
from yuxi.runtime.import_thread import import_in_background

if TYPE_CHECKING:
    from langgraph.pregel import Pregel

log = logging.getLogger("yuxi.api")
Conn = NamedDependency[AsyncConnection[Any]]
# what the built-in backends build their graph with, imported off the loop's thread
_GRAPH_MODULES = ("langgraph.graph", "langchain_core.runnables.graph", "yuxi.agents.graph")


async def _graph(agent: LgAssistant) -> Pregel[Any, Any, Any, Any]:
    """The agent's compiled graph, from its stored context (resources unset are the
    built-in tools every user has)."""
    try:
        backend = get_backend(agent.backend_id)
    except UnknownBackend as error:
        raise Refused(f"the graph of assistant {agent.slug} cannot be built: {error}") from None
    await import_in_background(*_GRAPH_MODULES)
    from langgraph.pregel import Pregel

    from yuxi.agents.tools import BUILTIN_TOOLS

    context = backend.context_schema()
    context.update_from_dict(dict(agent.config_json.get("context") or {}))
    if context.tools is None:
        context.tools = list(BUILTIN_TOOLS)
    try:
        graph = await backend.get_graph(context)
    except Exception as error:  # a backend's own failure: said, never a 500
        log.warning("drawing assistant %s: %s", agent.slug, type(error).__name__, exc_info=True)
        raise Refused(
            f"the graph of assistant {agent.slug} cannot be built outside a run"
            f" ({type(error).__name__})"
        ) from None
    if not isinstance(graph, Pregel):
        raise Refused(f"the graph of assistant {agent.slug} is not a LangGraph graph")
    return graph


def _xray(value: str) -> bool | int:
    if value in ("", "false", "False"):
        return False
    if value in ("true", "True"):
        return True
    try:
        depth = int(value)
    except ValueError:
        raise InvalidInput("xray must be true, false or a positive depth") from None
    if depth < 0:
        raise InvalidInput("xray must be true, false or a positive depth")
    return depth if depth > 0 else False


def _schema(graph: Any, what: str) -> Any:
    try:
        return getattr(graph, f"get_{what}_jsonschema")()
    except Exception:  # a schema LangGraph cannot render: none, as LangGraph answers
        return None


def _schemas(graph: Any) -> dict[str, Any]:
    return {
        "input_schema": _schema(graph, "input"),
        "output_schema": _schema(graph, "output"),
        # a graph's output is its state unless it declares another output schema
        "state_schema": _schema(graph, "output"),
        "config_schema": _schema(graph, "config"),
        "context_schema": _schema(graph, "context"),
    }


@get("/assistants/{assistant_id:str}/graph", summary="An assistant's graph", tags=["langgraph"])
async def assistant_graph(
    conn: Conn, user: NamedDependency[User], assistant_id: FromPath[str], xray: FromQuery[str] = ""
) -> dict[str, Any]:
    depth = _xray(xray)
    graph = await _graph(await access.assistant_row(conn, user, assistant_id))
    try:
        drawn = await graph.aget_graph(xray=depth)
        return drawn.to_json()
    except Exception as error:  # e.g. NotImplementedError: a graph LangGraph cannot draw
        raise Refused(
            f"the graph of assistant {assistant_id} cannot be drawn ({type(error).__name__})"
        ) from None


async def _subgraphs(
    conn: AsyncConnection[Any], user: User, assistant_id: str, namespace: str | None, recurse: str
) -> dict[str, Any]:
    graph = await _graph(await access.assistant_row(conn, user, assistant_id))
    found: dict[str, Any] = {}
    try:
        async for name, subgraph in graph.aget_subgraphs(
            namespace=namespace, recurse=recurse in ("true", "True")
        ):
            found[name] = _schemas(subgraph)
    except Exception as error:  # a node LangGraph cannot look into
        raise Refused(
            f"the subgraphs of assistant {assistant_id} cannot be listed ({type(error).__name__})"
        ) from None
    return found


@get(
    "/assistants/{assistant_id:str}/subgraphs",
    summary="The schemas of an assistant's subgraphs",
    tags=["langgraph"],
)
async def assistant_subgraphs(
    conn: Conn,
    user: NamedDependency[User],
    assistant_id: FromPath[str],
    recurse: FromQuery[str] = "",
) -> dict[str, Any]:
    return await _subgraphs(conn, user, assistant_id, None, recurse)


@get(
    "/assistants/{assistant_id:str}/subgraphs/{namespace:str}",
    summary="The schemas of an assistant's subgraphs under one namespace",
    tags=["langgraph"],
)
async def assistant_subgraphs_in(
    conn: Conn,
    user: NamedDependency[User],
    assistant_id: FromPath[str],
    namespace: FromPath[str],
    recurse: FromQuery[str] = "",
) -> dict[str, Any]:
    return await _subgraphs(conn, user, assistant_id, namespace, recurse)
