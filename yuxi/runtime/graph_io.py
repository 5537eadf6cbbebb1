"""What goes into a run's graph and what comes out of it, in yuxi's terms.

In: the run's input message, a resume value translated for the pending interrupts, or
nothing when a later attempt continues from the checkpoint an earlier one left. Out: the
messages to store, the interrupts, and the JSON payloads of the run's events.

Every checkpoint a run writes carries its run id in its metadata (``RUN_KEY``), so a
later attempt finds where the run started and what it did: it continues from the last
checkpoint (the input is not sent again, completed model and tool calls are not made
again), and one whose graph already ended takes its outcome from the checkpoint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, Interrupt, StateSnapshot

from yuxi.agents.context import BaseContext
from yuxi.queue.runs import OutputMessage, RunClaim
from yuxi.queue.statuses import RunType
from yuxi.runtime.state import RUN_KEY


@dataclass
class Resumed:
    """What an attempt after the first found in the checkpoints of its run."""

    # the ids of the messages the thread held before the run's first checkpoint
    before: set[str]
    # the messages earlier attempts produced (in the checkpoint now), in order
    earlier: list[BaseMessage]
    # the graph ended (or interrupted) in an earlier attempt: nothing is left to stream
    ended: bool
    # the latest checkpoint's interrupts, for a graph that ended interrupted
    interrupts: tuple[Interrupt, ...] = ()


async def resumed(graph: Any, config: RunnableConfig, claim: RunClaim) -> Resumed | None:
    """For an attempt after the first: what the run's earlier attempts checkpointed;
    None when they checkpointed nothing (this attempt starts the run afresh)."""
    run_id = str(claim.run.run_id)
    saver = graph.checkpointer
    first = None
    # the run's checkpoints, newest first (a metadata filter in the saver's query): the
    # last one is the run's first
    top = {"configurable": {**config.get("configurable", {}), "checkpoint_ns": ""}}
    async for saved in saver.alist(top, filter={RUN_KEY: run_id}):
        first = saved
    if first is None:
        return None
    before: set[str] = set()
    if first.parent_config is not None:
        parent = await saver.aget_tuple(first.parent_config)
        if parent is not None:
            messages = parent.checkpoint["channel_values"].get("messages") or []
            before = {m.id for m in messages if getattr(m, "id", None)}
    state = await graph.aget_state(config)
    earlier = produced_since(state, before)
    mine = (state.metadata or {}).get(RUN_KEY) == run_id
    ended = mine and (not state.next or bool(state.interrupts))
    return Resumed(before, earlier, ended, tuple(state.interrupts) if ended else ())


def produced_since(state: StateSnapshot, before: set[str]) -> list[BaseMessage]:
    """The AI messages and tool results of ``state`` the thread did not hold before."""
    messages = state.values.get("messages") or [] if isinstance(state.values, dict) else []
    return [m for m in messages if isinstance(m, (AIMessage, ToolMessage)) and m.id not in before]


async def graph_input(
    graph: Any,
    config: RunnableConfig,
    claim: RunClaim,
    images: list[dict[str, Any]] | None = None,
) -> Any:
    """What to stream: the run's input, or nothing when an earlier attempt of this run
    already checkpointed it and left work pending (the retry continues from there).
    ``images``: content blocks sent with the input text (a model with vision)."""
    run, payload = claim.run, claim.input.payload
    retry = claim.lease.attempt_no > 1
    state = await graph.aget_state(config) if retry or run.run_type == RunType.RESUME else None
    if run.run_type == RunType.RESUME:
        assert state is not None
        if retry and state.next and not state.interrupts:
            return None  # the earlier attempt already answered the interrupt
        return Command(resume=resume_value(payload.get("resume"), state.interrupts))
    if run.is_subagent:
        task = payload.get("task")
        text = task if isinstance(task, str) else json.dumps(payload, sort_keys=True)
    else:
        text = claim.input.text or ""
    keys = input_keys(graph)
    if keys is None or "messages" not in keys:
        return keyed_input(text, keys)
    # a stable id: a re-sent input replaces itself instead of appearing twice
    message_id = f"yuxi-input-{run.run_id}"
    if state is not None and state.next:
        messages = state.values.get("messages") or []
        if any(getattr(message, "id", None) == message_id for message in messages):
            return None
    content: Any = [{"type": "text", "text": text}, *images] if images else text
    return {"messages": [{"role": "user", "content": content, "id": message_id}]}


class GraphInputError(ValueError):
    """The run's message cannot be the input of a graph without ``messages``."""


def input_keys(graph: Any) -> list[str] | None:
    """The keys of a state graph's input; None for a graph without a state schema (the
    functional API's ``entrypoint``), whose input is one value."""
    builder = getattr(graph, "builder", None)
    schemas = getattr(builder, "schemas", None)
    schema = getattr(builder, "input_schema", None)
    if not isinstance(schemas, dict) or schema not in schemas:
        return None
    return list(schemas[schema])


def keyed_input(text: str, keys: list[str] | None) -> Any:
    """The input of a graph whose state has no ``messages``: the message's text as
    JSON (an object of the graph's input keys); a graph without a state schema takes any
    JSON value, or the text itself."""
    try:
        value = json.loads(text)
    except ValueError:
        if keys is None:
            return text
        value = None
    if keys is not None and not isinstance(value, dict):
        raise GraphInputError(
            f"this graph takes no messages: send its input ({', '.join(keys)}) as a JSON object"
        )
    return value


def final_values_text(values: Any) -> str:
    """The reply of a graph that produced no AI message: its final values (messages
    left out) as JSON."""
    if isinstance(values, dict):
        values = {k: v for k, v in values.items() if k != "messages"}
    return json.dumps(jsonable(values), ensure_ascii=False, sort_keys=True)


def resume_value(value: Any, pending: tuple[Interrupt, ...] | list[Interrupt]) -> Any:
    """Translates the API's resume value for the pending interrupt(s).

    An approval (``{"decision": "approve"|"reject", "message"?}``) answers every tool
    call of a human-in-the-loop request; anything else (e.g. the answer to ``ask_user``)
    is passed as it is. Several pending interrupts get the same answer, keyed by id.
    """

    def answer(interrupt: Interrupt) -> Any:
        request = interrupt.value
        decisions = value.get("decisions") if isinstance(value, dict) else None
        if isinstance(request, dict) and "action_requests" in request and isinstance(value, dict):
            wanted = len(request["action_requests"])
            if isinstance(decisions, list) and decisions:
                # one decision for several calls answers each (a UI that shows one);
                # respond (a LangGraph UI's reply) is a rejection the model reads
                given = [_approval(d) for d in decisions]
                return {"decisions": given if len(given) == wanted else given[:1] * wanted}
            decision: dict[str, Any] = {"type": value.get("decision", "reject")}
            if decision["type"] == "reject" and value.get("message"):
                decision["message"] = str(value["message"])
            return {"decisions": [decision for _ in request["action_requests"]]}
        if _is_question(request) and isinstance(decisions, list) and decisions:
            # a LangGraph UI's answer to a question: the decision's message
            first = decisions[0] if isinstance(decisions[0], dict) else {}
            return str(first.get("message") or first.get("args") or "")
        return value

    if len(pending) == 1:
        return answer(pending[0])
    if not pending:
        return value
    return {interrupt.id: answer(interrupt) for interrupt in pending}


def _approval(decision: Any) -> Any:
    if isinstance(decision, dict) and decision.get("type") == "respond":
        rejected = {"type": "reject"}
        return rejected | ({"message": str(decision["message"])} if decision.get("message") else {})
    return decision


def _is_question(request: Any) -> bool:
    return isinstance(request, dict) and request.get("type") == "question"


def interrupt_of(value: Any) -> Interrupt:
    """An interrupt of an ``updates`` stream part as an ``Interrupt``."""
    # updates carry Interrupt objects or their dict form, depending on the stream version
    if isinstance(value, Interrupt):
        return value
    return Interrupt(value=value.get("value"), id=value.get("id", ""))


def messages_of(update: Any) -> list[BaseMessage]:
    """The AI messages and tool results of one node's update (what a run stores)."""
    if not isinstance(update, dict):
        return []
    messages = update.get("messages") or []
    if not isinstance(messages, list):
        messages = [messages]
    if not all(isinstance(m, BaseMessage) for m in messages):
        # a project's graph may return messages as dicts, tuples or text
        messages = [_message(m) for m in messages]
    return [m for m in messages if isinstance(m, (AIMessage, ToolMessage))]


def _message(value: Any) -> Any:
    if isinstance(value, BaseMessage):
        return value
    try:
        message = convert_to_messages([value])[0]
    except (ValueError, TypeError, NotImplementedError):
        return value
    if message.id is None:
        message.id = f"lc-{uuid4()}"
    return message


def stored_message(message: BaseMessage) -> OutputMessage:
    """``message`` as a row of ``yuxi.messages`` (role, text, metadata)."""
    if isinstance(message, ToolMessage):
        return OutputMessage(
            "tool",
            text_of(message),
            {
                "name": message.name,
                "tool_call_id": message.tool_call_id,
                "status": message.status,
            },
        )
    metadata: dict[str, Any] = {}
    if isinstance(message, AIMessage) and message.tool_calls:
        metadata["tool_calls"] = tool_calls_of(message)
    return OutputMessage("assistant", text_of(message), metadata)


def tool_calls_of(message: AIMessage) -> list[dict[str, Any]]:
    """The tool calls of an AI message, as events and stored messages show them."""
    return [{"id": c["id"], "name": c["name"], "args": c["args"]} for c in message.tool_calls]


def text_of(message: BaseMessage) -> str:
    """The message's text as a plain ``str``."""
    # .text is a str-like accessor in langchain-core 1.x; store and send plain str
    return str(message.text)


def metadata_payload(claim: RunClaim, context: BaseContext, workdir: str | None) -> dict[str, Any]:
    """The ``metadata`` event of one attempt. ``workdir`` is the client's form of the
    Context's workdir (relative to the user's workspace), never the host path."""
    return {
        "run_id": str(claim.run.run_id),
        "thread_id": str(claim.run.thread_id),
        "attempt": claim.lease.attempt_no,
        "model": context.model,
        "tool_approval_mode": context.tool_approval_mode,
        "workdir": workdir,
    }


def interrupt_payload(interrupts: list[Interrupt]) -> dict[str, Any]:
    """The ``interrupt`` event: each pending interrupt's id and JSON value."""
    return {"interrupts": [{"id": i.id, "value": jsonable(i.value)} for i in interrupts]}


def jsonable(value: Any) -> Any:
    """``value`` made JSON-compatible (anything unknown becomes its ``str``)."""
    return json.loads(json.dumps(value, default=str))
