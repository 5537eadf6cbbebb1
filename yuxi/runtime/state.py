"""Reading a conversation's agent state straight from the checkpointer.

It reads the root namespace's latest checkpoint and the interrupts among its pending
writes; it builds no Context and no model. An interrupt is reported only while the
conversation's latest run is `interrupted` — otherwise it is history, not a question.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from yuxi.queue.statuses import RunStatus

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

STATE_KEYS = ("todos", "files", "artifacts", "subagent_runs")
INTERRUPT_CHANNEL = "__interrupt__"
# the key of the run id in each checkpoint's metadata (yuxi.runtime.graph_io writes it)
RUN_KEY = "yuxi_run_id"


class PendingInterrupt(msgspec.Struct, frozen=True):
    id: str
    value: Any


class ThreadState(msgspec.Struct, frozen=True):
    """``agent_state``: the state keys the agent keeps (todos, files, artifacts, …) and
    the message count; ``interrupt``: the question or approval waiting, if any."""

    agent_state: dict[str, Any]
    interrupt: PendingInterrupt | None


async def read_thread_state(
    checkpointer: BaseCheckpointSaver[Any], thread_id: str, *, latest_run_status: str | None
) -> ThreadState:
    saved = await checkpointer.aget_tuple(
        {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    )
    if saved is None:
        return ThreadState({key: _empty(key) for key in STATE_KEYS} | {"message_count": 0}, None)
    values = saved.checkpoint.get("channel_values", {})
    agent_state: dict[str, Any] = {key: _plain(values.get(key, _empty(key))) for key in STATE_KEYS}
    agent_state["message_count"] = len(values.get("messages") or [])
    interrupt = None
    if latest_run_status == RunStatus.INTERRUPTED:
        # loaded already by the checkpointer that read ``saved``; not at import, so the
        # API starts without LangGraph
        from langgraph.types import Interrupt

        for _task_id, channel, value in saved.pending_writes or []:
            if channel != INTERRUPT_CHANNEL:
                continue
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(item, Interrupt):
                    interrupt = PendingInterrupt(item.id, _plain(item.value))
    return ThreadState(agent_state, interrupt)


def _empty(key: str) -> Any:
    return {} if key == "files" else []


def _plain(value: Any) -> Any:
    """JSON-compatible form of a state value (dataclasses, pydantic models, tuples)."""
    return msgspec.to_builtins(value, enc_hook=_fallback)


def _fallback(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    return str(value)
