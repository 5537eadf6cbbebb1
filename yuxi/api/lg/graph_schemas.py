"""The schemas of an assistant served from a LangGraph project's graph (``yuxi up
--graphs``): the graph's own input, output, state and context schemas, in place of
yuxi's messages schemas."""

from __future__ import annotations

from typing import Any

from yuxi.api.lg.errors import Refused
from yuxi.queue.agents import VisibleAgent


async def graph_schemas(agent: VisibleAgent) -> dict[str, Any]:
    """The schemas the agent's graph declares (none for another backend); a graph that
    fails to load is 422 with its error."""
    from yuxi.agents.graphs import GraphLoadError, graph_backend

    backend = graph_backend(agent.backend_id)
    if backend is None:
        return {}
    try:
        schemas = await backend.schemas()
    except GraphLoadError as error:
        raise Refused(f"{error}; its schemas cannot be read") from None
    # a graph without a context schema keeps yuxi's (the run's model, approval mode)
    return {key: value for key, value in schemas.items() if value is not None}
