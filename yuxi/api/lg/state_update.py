"""``threads.update_state``: a new head checkpoint written by LangGraph's own
``aupdate_state`` on the thread's agent graph, and its messages appended to the thread's
message history, both under the thread's lock (``yuxi.lg_thread_state_update``).

The graph is the agent backend's, built in the API process on first use with the
scripted model (its channels and nodes are what ``aupdate_state`` needs; no model is
called), so the API starts without LangGraph. What yuxi's message history cannot show
is refused: replacing or removing a message, a system message, an update from a
checkpoint other than the latest (a fork), and any update while a run is active, queued
or waiting for a resume."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from psycopg import AsyncConnection

from yuxi.agents.registry import UnknownBackend, get_backend
from yuxi.api.lg import state as lg_state
from yuxi.api.lg.errors import Refused
from yuxi.queue.errors import InvalidInput
from yuxi.queue.lg import lg_thread_state_lock, lg_thread_state_update

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

# the model the graph is built with: its structure does not depend on the model, and
# the scripted one needs no key and no network
_STRUCTURE_MODEL = "builtin:scripted"


async def agent_graph(backend_id: str, checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """The backend's compiled graph over ``checkpointer`` (the backend caches it)."""
    try:
        backend = get_backend(backend_id)
    except UnknownBackend:
        raise Refused(f"the thread's agent backend {backend_id} is not installed here") from None
    context = backend.context_schema()
    context.model = _STRUCTURE_MODEL
    return await backend.get_graph(context, checkpointer=checkpointer)


def _check_channels(graph: Any, saved: CheckpointTuple | None) -> None:
    """Refuses a graph that would lose part of the thread's state: LangGraph writes the
    new checkpoint from the graph's channels only."""
    if saved is None:
        return
    missing = set(saved.checkpoint.get("channel_versions", {})) - set(graph.channels)
    if missing:
        raise Refused(
            "this thread's state has channels its agent's graph does not build here"
            f" ({', '.join(sorted(missing))}); update_state would lose them"
        )


def history_rows(update: dict[str, Any], saved: CheckpointTuple | None) -> list[dict[str, Any]]:
    """The messages of ``update`` as rows of the thread's history; refuses what the
    history cannot show (it is append-only and has no system messages)."""
    raw = update.get("messages")
    if raw is None:
        return []
    from langchain_core.messages import (
        AIMessage,
        HumanMessage,
        RemoveMessage,
        ToolMessage,
        convert_to_messages,
    )

    from yuxi.runtime.graph_io import stored_message

    try:
        messages = convert_to_messages(raw if isinstance(raw, list) else [raw])
    except (ValueError, TypeError, KeyError, NotImplementedError) as error:
        # langchain's conversion raises these for a message it cannot read
        raise InvalidInput(f"values.messages: a message cannot be read ({error!r})") from None
    held = {
        m.id
        for m in (saved.checkpoint["channel_values"].get("messages") or [] if saved else [])
        if getattr(m, "id", None)
    }
    rows = []
    for message in messages:
        if isinstance(message, RemoveMessage) or (message.id and message.id in held):
            raise Refused(
                "replacing or removing a message is not supported: a thread's message"
                " history is append-only; add new messages (without an existing id)"
            )
        if isinstance(message, HumanMessage):
            rows.append({"role": "user", "content": str(message.text), "metadata": {}})
        elif isinstance(message, (AIMessage, ToolMessage)):
            out = stored_message(message)
            rows.append({"role": out.role, "content": out.content, "metadata": out.metadata})
        else:
            raise Refused(
                f"{message.type} messages are not supported in update_state: a thread's"
                " history holds user, assistant and tool messages"
            )
    return rows


async def update_state(
    conn: AsyncConnection[Any],
    checkpointer: BaseCheckpointSaver[Any],
    *,
    uid: UUID,
    thread_id: UUID,
    backend_id: str,
    values: dict[str, Any],
    as_node: str | None,
    checkpoint_id: str | None,
) -> dict[str, Any]:
    """Writes the update in one transaction of ``conn`` holding the thread's lock: the
    history rows first, then the checkpoint; a failure of either leaves neither (the
    checkpoint is the last write). Returns the new checkpoint."""
    from langgraph.errors import InvalidUpdateError

    graph = await agent_graph(backend_id, checkpointer)
    if as_node is not None and as_node not in graph.nodes:
        raise InvalidInput(f"as_node {as_node} is not a node of this graph")
    unknown = {k for k in values if k not in graph.channels or k.startswith(lg_state.HIDDEN)}
    if unknown:
        raise InvalidInput(f"values has keys the state does not: {', '.join(sorted(unknown))}")
    config = {"configurable": {"thread_id": str(thread_id), "checkpoint_ns": ""}}
    async with conn.transaction():
        await lg_thread_state_lock(conn, uid, thread_id)
        saved: CheckpointTuple | None = await lg_state.head(checkpointer, str(thread_id))
        head = None if saved is None else str(saved.checkpoint["id"])
        if checkpoint_id is not None and checkpoint_id != head:
            raise Refused(
                "updating the state from an earlier checkpoint is not supported (no forking):"
                " a thread's message history is linear; send the latest checkpoint or none"
            )
        _check_channels(graph, saved)
        rows = history_rows(values, saved)
        await lg_thread_state_update(conn, uid, thread_id, rows)
        try:
            written = await graph.aupdate_state(config, values, as_node=as_node)
        except InvalidUpdateError as error:
            raise InvalidInput(f"update_state: {error}") from None
    found = written["configurable"]
    return {
        "checkpoint": {
            "thread_id": str(thread_id),
            "checkpoint_ns": found.get("checkpoint_ns", ""),
            "checkpoint_id": found["checkpoint_id"],
            "checkpoint_map": None,
        }
    }
