"""A thread's state as LangGraph shows it, read straight from the checkpointer: its
values (messages as langchain dicts), the pending interrupt, its checkpoints.

LangChain and LangGraph are imported inside the functions that meet their objects: a
checkpoint comes from the checkpointer, which has loaded them by then (it is built on
the first state read, yuxi.api.state), so the API starts without them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from yuxi.api.lg.errors import Refused
from yuxi.api.lg.views import lg_interrupt
from yuxi.queue.errors import InvalidInput
from yuxi.runtime.state import INTERRUPT_CHANNEL, RUN_KEY

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

HIDDEN = ("__", "branch:")  # LangGraph's own channels


def _plain(value: Any) -> Any:
    from langchain_core.messages import BaseMessage

    if isinstance(value, BaseMessage):
        return value.model_dump()
    return msgspec.to_builtins(value, enc_hook=_fallback)


def _fallback(value: Any) -> Any:
    from langchain_core.messages import BaseMessage

    if isinstance(value, BaseMessage):
        return value.model_dump()
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    return str(value)


def _config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def checkpoint_id_of(thread_id: str, checkpoint: Any) -> str | None:
    """The checkpoint id of a body's ``checkpoint`` (``{thread_id?, checkpoint_ns?,
    checkpoint_id?}``, as RemoteGraph sends its config): None for the thread's latest.
    Another thread's id is 400; a subgraph's namespace is refused (a yuxi graph's state
    is its root namespace: subagents are runs of their own)."""
    if checkpoint is None:
        return None
    if not isinstance(checkpoint, dict):
        raise InvalidInput("checkpoint must be an object")
    given = checkpoint.get("thread_id")
    if given is not None and str(given) != thread_id:
        raise InvalidInput("checkpoint.thread_id must be the thread of the path")
    if checkpoint.get("checkpoint_ns"):
        raise Refused("subgraph checkpoints are not supported: a yuxi thread has one namespace")
    found = checkpoint.get("checkpoint_id")
    if found is not None and not isinstance(found, str):
        raise InvalidInput("checkpoint.checkpoint_id must be a string")
    return found or None


def values_of(saved: CheckpointTuple | None) -> dict[str, Any]:
    if saved is None:
        return {}
    channels = saved.checkpoint.get("channel_values", {})
    return {
        key: [_plain(m) for m in value] if key == "messages" else _plain(value)
        for key, value in channels.items()
        if not key.startswith(HIDDEN)
    }


def interrupts_of(saved: CheckpointTuple | None) -> list[dict[str, Any]]:
    if saved is None:
        return []
    from langgraph.types import Interrupt

    found = []
    for _task, channel, value in saved.pending_writes or []:
        if channel != INTERRUPT_CHANNEL:
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, Interrupt):
                found.append(lg_interrupt(item.id, _plain(item.value)))
    return found


async def head(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> CheckpointTuple | None:
    return await checkpointer.aget_tuple(_config(thread_id))  # type: ignore[arg-type]


async def at(
    checkpointer: BaseCheckpointSaver[Any], thread_id: str, checkpoint_id: str | None
) -> CheckpointTuple | None:
    """The thread's checkpoint ``checkpoint_id`` (its latest when None), or None."""
    return await checkpointer.aget_tuple(_config(thread_id, checkpoint_id))  # type: ignore[arg-type]


async def run_head(
    checkpointer: BaseCheckpointSaver[Any], thread_id: str, run_id: str
) -> CheckpointTuple | None:
    """The latest checkpoint the run ``run_id`` wrote: the thread as that run left it,
    although a run queued behind it may have started since."""
    async for saved in checkpointer.alist(
        _config(thread_id),  # type: ignore[arg-type]
        filter={RUN_KEY: run_id},
        limit=1,
    ):
        return saved
    return None


async def head_id(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> str | None:
    saved = await head(checkpointer, thread_id)
    return None if saved is None else str(saved.checkpoint["id"])


def state_view(
    saved: CheckpointTuple | None, thread_id: str, *, interrupted: bool
) -> dict[str, Any]:
    """LangGraph's ThreadState of a checkpoint; interrupts only while the thread is
    interrupted (otherwise a pending write is history, not a question)."""
    interrupts = interrupts_of(saved) if interrupted else []
    if saved is None:
        return {
            "values": {},
            "next": [],
            "tasks": [],
            "metadata": {},
            "created_at": None,
            "checkpoint": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": None},
            "parent_checkpoint": None,
            "interrupts": [],
        }
    parent = saved.parent_config["configurable"] if saved.parent_config else None
    tasks = []
    if interrupts:
        tasks = [
            {
                "id": str(saved.checkpoint["id"]),
                "name": "tools",
                "error": None,
                "interrupts": interrupts,
                "checkpoint": None,
                "state": None,
                "result": None,
            }
        ]
    return {
        "values": values_of(saved),
        "next": ["tools"] if interrupts else [],
        "tasks": tasks,
        "metadata": _plain(dict(saved.metadata or {})),
        "created_at": saved.checkpoint.get("ts"),
        "checkpoint": {
            "thread_id": thread_id,
            "checkpoint_ns": "",
            "checkpoint_id": str(saved.checkpoint["id"]),
        },
        "parent_checkpoint": (
            None
            if parent is None
            else {
                "thread_id": thread_id,
                "checkpoint_ns": "",
                "checkpoint_id": parent.get("checkpoint_id"),
            }
        ),
        "interrupts": interrupts,
    }


async def history(
    checkpointer: BaseCheckpointSaver[Any],
    thread_id: str,
    *,
    limit: int,
    before: str | None,
    interrupted: bool,
    checkpoint_id: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The thread's checkpoints, newest first (interrupts on the head only), as the
    checkpointer's ``alist`` filters them: ``checkpoint_id`` that one checkpoint,
    ``metadata`` those whose metadata contains it."""
    latest = await head_id(checkpointer, thread_id) if interrupted else None
    states: list[dict[str, Any]] = []
    before_config = _config(thread_id, before) if before else None
    async for saved in checkpointer.alist(
        _config(thread_id, checkpoint_id),  # type: ignore[arg-type]
        filter=metadata or None,
        before=before_config,  # type: ignore[arg-type]
        limit=limit,
    ):
        is_head = latest is not None and str(saved.checkpoint["id"]) == latest
        states.append(state_view(saved, thread_id, interrupted=is_head))
    return states


async def copy_checkpoints(checkpointer: BaseCheckpointSaver[Any], source: str, target: str) -> int:
    """Copies every root checkpoint of thread ``source`` (with its pending writes) to
    thread ``target``, oldest first, each under the same id and parent: the copy's
    history is the source's. Returns how many were copied."""
    saved = [s async for s in checkpointer.alist(_config(source))]  # type: ignore[arg-type]
    for one in reversed(saved):
        parent = (
            one.parent_config["configurable"].get("checkpoint_id") if one.parent_config else None
        )
        config = _config(target, parent)
        await checkpointer.aput(
            config,  # type: ignore[arg-type]
            one.checkpoint,
            one.metadata,
            dict(one.checkpoint.get("channel_versions", {})),
        )
        writes: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in one.pending_writes or []:
            writes.setdefault(task_id, []).append((channel, value))
        for task_id, items in writes.items():
            await checkpointer.aput_writes(
                _config(target, str(one.checkpoint["id"])),  # type: ignore[arg-type]
                items,
                task_id,
            )
    return len(saved)
