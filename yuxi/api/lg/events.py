"""A run's stored events (``yuxi.run_events``) as LangGraph stream parts.

Each yuxi event becomes zero or more parts, and the last part of each carries the
event's seq as its SSE ``id``, so a client that resumes from the last id it saw gets
nothing twice and misses nothing. yuxi's ``metadata`` becomes LangGraph's ``metadata``
``{run_id, attempt}``; model text becomes ``messages`` tuples (``messages-tuple``) or
``messages/partial`` (``messages``); a tool call, a tool result, the final answer and
an interrupt become ``updates`` (and ``values``, the thread's messages so far); yuxi's
``error`` becomes ``error``; yuxi's ``end`` is not sent as it is: the stream ends with
LangGraph's ``end``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from yuxi.api.lg.views import lg_interrupt
from yuxi.api.sse import sse_message


def ai_message(message_id: str, text: str, tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "ai",
        "id": message_id,
        "content": text,
        "additional_kwargs": {},
        "response_metadata": {},
        "name": None,
        "tool_calls": [
            {"id": c.get("id"), "name": c.get("name"), "args": c.get("args"), "type": "tool_call"}
            for c in tool_calls
        ],
        "invalid_tool_calls": [],
        "usage_metadata": None,
    }


def tool_message(
    message_id: str, content: str, tool_call_id: str, name: str, status: str
) -> dict[str, Any]:
    return {
        "type": "tool",
        "id": message_id,
        "content": content,
        "tool_call_id": tool_call_id,
        "name": name,
        "status": status,
        "additional_kwargs": {},
        "response_metadata": {},
    }


def human_message(message_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "human",
        "id": message_id,
        "content": text,
        "additional_kwargs": {},
        "response_metadata": {},
        "name": None,
    }


@dataclass
class Translator:
    """Turns one run's events, in seq order, into SSE messages for ``modes``."""

    modes: list[str]
    run_id: str  # LangGraph's run id (yuxi's request id)
    thread_id: str
    base: list[dict[str, Any]]  # the thread's messages before this run's output
    messages: list[dict[str, Any]] = field(default_factory=list)
    _text_id: str | None = None
    _text: str = ""
    _values_sent: bool = False
    _step: int = 0
    # a subagent's run inside its parent's stream: parts named "<mode>|<namespace>",
    # without ids (the parent's events carry them), no metadata and no end
    namespace: str | None = None
    _task: str | None = None  # the step under way: its task id and node
    _node: str = ""

    def feed(self, seq: int, event: str, payload: dict[str, Any]) -> list[bytes]:
        """The SSE messages of one event (the last one carries ``seq`` as its id)."""
        parts: list[tuple[str, Any]] = []
        if event == "metadata":
            parts.append(("metadata", {"run_id": self.run_id, "attempt": payload.get("attempt")}))
            if not self._values_sent:
                self._values_sent = True
                parts.extend(self._values())
                parts.extend(self._event("on_chain_start", "LangGraph", {"input": self._state()}))
        elif event == "messages":
            parts.extend(self._chunks(payload.get("chunks") or []))
        elif event == "tool" and payload.get("type") == "call":
            parts.extend(self._start("model"))
            message_id, text = self._take_text()
            message = ai_message(message_id or f"run-{self.run_id}-{seq}", text, payload["calls"])
            parts.extend(self._update("model", message))
        elif event == "tool":
            parts.extend(self._close_text())
            message = tool_message(
                f"tool-{payload.get('tool_call_id')}",
                str(payload.get("content", "")),
                str(payload.get("tool_call_id")),
                str(payload.get("name")),
                str(payload.get("status", "success")),
            )
            parts.extend(self._update("tools", message))
        elif event == "interrupt":
            parts.extend(self._close_text())
            parts.extend(self._steps(self._start("tools"), interrupts=payload.get("interrupts")))
            interrupts = [
                lg_interrupt(str(i.get("id")), i.get("value"))
                for i in payload.get("interrupts") or []
            ]
            if "updates" in self.modes:
                parts.append(("updates", {"__interrupt__": interrupts}))
            if "values" in self.modes:
                parts.append(("values", self._state() | {"__interrupt__": interrupts}))
        elif event == "error":
            parts.extend(self._close_text())
            parts.append(
                (
                    "error",
                    {
                        "error": payload.get("error_type") or "Error",
                        "message": payload.get("message"),
                    },
                )
            )
        elif event == "custom":
            if "custom" in self.modes:
                parts.append(("custom", payload))
        elif event == "end":
            parts.extend(self._close_text())
            parts.extend(self._event("on_chain_end", "LangGraph", {"output": self._state()}))
            parts.append(("end", None))
        if self.namespace is not None:
            return [
                sse_message(json.dumps(data, default=str), event=f"{name}|{self.namespace}")
                for name, data in parts
                if name not in ("metadata", "end")
            ]
        return _encode(parts, seq)

    def _chunks(self, chunks: list[dict[str, Any]]) -> list[tuple[str, Any]]:
        parts: list[tuple[str, Any]] = []
        for chunk in chunks:
            message_id, text = str(chunk.get("message_id")), str(chunk.get("text", ""))
            if self._text_id is not None and self._text_id != message_id:
                parts.extend(self._close_text())
            first = self._text_id is None
            if first:
                parts.extend(self._start("model"))
            self._text_id = message_id
            self._text += text
            meta = {"langgraph_node": "model", "run_id": self.run_id, "thread_id": self.thread_id}
            piece = ai_message(message_id, text, []) | {"type": "AIMessageChunk"}
            if "messages-tuple" in self.modes:
                parts.append(("messages", [piece, meta]))
            parts.extend(self._event("on_chat_model_stream", "model", {"chunk": piece}, meta))
            if "messages" in self.modes:
                if first:
                    parts.append(("messages/metadata", {message_id: {"metadata": meta}}))
                parts.append(("messages/partial", [ai_message(message_id, self._text, [])]))
        return parts

    def _take_text(self) -> tuple[str | None, str]:
        message_id, text = self._text_id, self._text
        self._text_id, self._text = None, ""
        return message_id, text

    def _close_text(self) -> list[tuple[str, Any]]:
        """The streamed answer, complete: its update (a message without tool calls)."""
        message_id, text = self._take_text()
        if message_id is None:
            return []
        message = ai_message(message_id, text, [])
        parts: list[tuple[str, Any]] = []
        if "messages" in self.modes:
            parts.append(("messages/complete", [message]))
        return parts + self._update("model", message)

    def _update(self, node: str, message: dict[str, Any]) -> list[tuple[str, Any]]:
        parts = self._start(node)
        self.messages.append(message)
        if "updates" in self.modes:
            parts.append(("updates", {node: {"messages": [message]}}))
        parts.extend(self._values())
        return self._steps(parts, result={"messages": [message]})

    # The step parts (``tasks``, ``checkpoints``, ``debug``, ``events``): a run's model
    # calls and tool results are its steps; a step's task starts with its first output
    # and ends with its message. yuxi's events do not carry checkpoint ids: a
    # checkpoint part's config names the thread (read ids with threads.get_history).

    def _start(self, node: str) -> list[tuple[str, Any]]:
        if self._task is not None:
            return []
        self._step += 1
        self._task = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.run_id}/{self._step}"))
        self._node = node
        task = {"id": self._task, "name": node, "input": None, "triggers": [f"branch:to:{node}"]}
        parts = self._step_parts("task", task)
        event = "on_chat_model_start" if node == "model" else "on_chain_start"
        return parts + self._event(event, node, {"input": None})

    def _steps(
        self,
        parts: list[tuple[str, Any]],
        *,
        result: dict[str, Any] | None = None,
        interrupts: list[dict[str, Any]] | None = None,
    ) -> list[tuple[str, Any]]:
        """``parts`` followed by the end of the step under way and its checkpoint."""
        if self._task is None:
            return parts
        name = "tools" if (result is None or result["messages"][0]["type"] == "tool") else "model"
        done = {
            "id": self._task,
            "name": name,
            "error": None,
            "result": result or {},
            "interrupts": [
                lg_interrupt(str(i.get("id")), i.get("value")) for i in interrupts or []
            ],
        }
        self._task = None
        parts = parts + self._step_parts("task_result", done)
        if result is not None:
            parts.extend(self._event("on_chain_end", name, {"output": result}))
        checkpoint = {
            "config": {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}},
            "parent_config": None,
            "values": self._state(),
            "metadata": {"source": "loop", "step": self._step, "run_id": self.run_id},
            "next": ["tools"] if interrupts else [],
            "tasks": [],
        }
        return parts + self._step_parts("checkpoint", checkpoint)

    def _step_parts(self, kind: str, payload: dict[str, Any]) -> list[tuple[str, Any]]:
        parts: list[tuple[str, Any]] = []
        mode = "checkpoints" if kind == "checkpoint" else "tasks"
        if mode in self.modes:
            parts.append((mode, payload))
        if "debug" in self.modes:
            stamp = datetime.now(UTC).isoformat()
            parts.append(
                (
                    "debug",
                    {"type": kind, "timestamp": stamp, "step": self._step, "payload": payload},
                )
            )
        return parts

    def _event(
        self, event: str, name: str, data: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> list[tuple[str, Any]]:
        """An ``events`` part, as LangChain's astream_events (v2) shapes it."""
        if "events" not in self.modes:
            return []
        return [
            (
                "events",
                {
                    "event": event,
                    "name": name,
                    "run_id": self.run_id,
                    "tags": [],
                    "metadata": meta or {"thread_id": self.thread_id, "run_id": self.run_id},
                    "data": data,
                    "parent_ids": [],
                },
            )
        ]

    def _state(self) -> dict[str, Any]:
        return {"messages": self.base + self.messages}

    def _values(self) -> list[tuple[str, Any]]:
        return [("values", self._state())] if "values" in self.modes else []


def _encode(parts: list[tuple[str, Any]], seq: int) -> list[bytes]:
    last = len(parts) - 1
    return [
        sse_message(json.dumps(data, default=str), event=name, id=seq if i == last else None)
        for i, (name, data) in enumerate(parts)
    ]
