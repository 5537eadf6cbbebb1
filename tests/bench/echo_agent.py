"""A one-node echo graph as an agent backend, for ``http_runs --agent``.

``tests.bench.echo_agent:EchoAgent`` replies ``echo: <the last message>`` without a
model, tools or middleware: what remains of a run is yuxi's own cost (queue, delivery,
lease, manifest, events, checkpoints, HTTP). A package would register it through the
``yuxi.agents`` entry point group; the benchmark registers it in the server process with
``yuxi.agents.registry.register_backend``, which has the same effect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yuxi.agents.base import BaseAgent
from yuxi.agents.context import BaseContext

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph


class EchoAgent(BaseAgent):
    backend_id = "bench_echo"
    name = "Echo"
    description = "Replies 'echo: <your message>' (a benchmark backend)"

    async def get_graph(
        self, context: BaseContext, *, checkpointer: BaseCheckpointSaver[Any] | None = None
    ) -> CompiledStateGraph[Any, Any, Any, Any]:
        from langchain_core.messages import AIMessage, AnyMessage
        from langgraph.graph import START, MessagesState, StateGraph

        def echo(state: MessagesState) -> dict[str, list[AnyMessage]]:
            return {"messages": [AIMessage(f"echo: {state['messages'][-1].content}")]}

        graph = StateGraph(MessagesState)
        graph.add_node("echo", echo)
        graph.add_edge(START, "echo")
        return graph.compile(checkpointer=checkpointer)
