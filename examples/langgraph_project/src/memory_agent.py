"""A graph that remembers what it is told, in the LangGraph store (``get_store()``):
every thread of the same user sees the same memories."""

from __future__ import annotations

from uuid import uuid4

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.graph import START, MessagesState, StateGraph


async def remember(state: MessagesState, config: RunnableConfig) -> dict:
    store = get_store()
    namespace = ("memories", str(config["configurable"].get("langgraph_auth_user_id", "anonymous")))
    said = state["messages"][-1].content
    await store.aput(namespace, str(uuid4()), {"text": said})
    memories = [item.value["text"] for item in await store.asearch(namespace, limit=100)]
    return {
        "messages": [{"role": "assistant", "content": "I remember: " + "; ".join(sorted(memories))}]
    }


graph = StateGraph(MessagesState).add_node(remember).add_edge(START, "remember").compile()
