"""BaseAgent: what every agent backend provides."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from yuxi.agents.context import BaseContext

if TYPE_CHECKING:
    # annotations only: a process that serves the API never needs LangGraph loaded
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph


class BaseAgent:
    """An agent backend. Subclasses set the class attributes and build the graph from a
    prepared Context; they never read configuration from anywhere else.

    ``backend_id`` is the name of the backend's entry point in the ``yuxi.agents`` group
    (the registry sets it when the class does not); ``name`` defaults to it.
    """

    backend_id: ClassVar[str]
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    context_schema: ClassVar[type[BaseContext]] = BaseContext
    # fixed UI affordances (e.g. "file_upload", "files"), not runtime state
    capabilities: ClassVar[tuple[str, ...]] = ()

    async def get_graph(
        self, context: BaseContext, *, checkpointer: BaseCheckpointSaver[Any] | None = None
    ) -> CompiledStateGraph[Any, Any, Any, Any]:
        """The graph for one run, built from the prepared ``context``."""
        raise NotImplementedError

    def get_info(self, options: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
        """Description of the backend, with its configuration form; ``options`` as in
        ``BaseContext.get_configurable_items``."""
        return {
            "backend_id": self.backend_id,
            "name": self.name or self.backend_id,
            "description": self.description,
            "capabilities": list(self.capabilities),
            "configurable_items": self.context_schema.get_configurable_items(options),
        }
