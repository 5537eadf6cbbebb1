"""Executing one run end to end, under its lease.

claim → prepare the Context (renewing the lease) → commit manifest v2 → re-check the
run's identity → build the graph → stream it with the PostgreSQL checkpointer, appending
events → store the assistant messages and finish the run in one transaction.

Cancellation: a committed cancel request reaches the executor by NOTIFY (the process's
CancelWatcher) and, as a fallback, through each lease renewal; the graph task is
cancelled and the run ends `cancelled`. A cancel that arrives while the Context is being
prepared is honoured the same way: the graph never starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command, Interrupt
from psycopg_pool import AsyncConnectionPool

from yuxi.agents.context import BaseContext
from yuxi.agents.delegation import current_delegate
from yuxi.agents.registry import UnknownBackend, get_backend
from yuxi.queue.errors import LeaseLost, ManifestConflict, RunNotClaimable
from yuxi.queue.events import append_events
from yuxi.queue.models import ClaimedRun, OutputMessage, RunEvent
from yuxi.queue.runs import claim_run, commit_manifest, finish_run, release_run, renew_lease
from yuxi.runtime.cancel import CancelWatcher
from yuxi.runtime.child_runs import ChildRuns
from yuxi.runtime.inputs import ExecutionInput, load_execution_input
from yuxi.runtime.manifest import build_manifest, manifest_fingerprint
from yuxi.runtime.prepare import prepare_agent_runtime_context
from yuxi.runtime.resources import ResourceCatalog

log = logging.getLogger("yuxi.runtime")


@dataclass(frozen=True)
class ExecutorSettings:
    worker_name: str
    home: Path
    lease_seconds: float = 60.0
    renew_seconds: float = 10.0
    # message chunks are flushed as one `messages` event at most this often
    flush_seconds: float = 0.1


@dataclass
class Outcome:
    status: str
    messages: list[OutputMessage] = field(default_factory=list)
    error_type: str | None = None
    error_message: str | None = None
    # events not yet written: they go into the finishing transaction
    events: list[RunEvent] = field(default_factory=list)


class RunFailure(Exception):
    """A run cannot go on; ends it `failed` with this error type and message."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


class RunExecutor:
    """Executes runs for one worker process. Safe to call concurrently for different runs."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        checkpointer: BaseCheckpointSaver[Any],
        catalog: ResourceCatalog,
        watcher: CancelWatcher,
        settings: ExecutorSettings,
    ) -> None:
        self.pool = pool
        self.checkpointer = checkpointer
        self.catalog = catalog
        self.watcher = watcher
        self.settings = settings

    async def execute(self, run_id: UUID) -> str | None:
        """Runs ``run_id`` if it can be claimed; returns its final status, or None when
        another delivery already has it. Cancelling this coroutine (worker shutdown)
        releases the run for another attempt."""
        try:
            async with self.pool.connection() as conn:
                claimed = await claim_run(
                    conn,
                    run_id,
                    worker=self.settings.worker_name,
                    lease_seconds=self.settings.lease_seconds,
                )
        except RunNotClaimable as error:
            log.info("run %s not claimed: %s", run_id, error)
            return None
        with self.watcher.watch(run_id) as cancelled:
            return await self._execute_claimed(claimed, cancelled)

    async def _execute_claimed(self, claimed: ClaimedRun, cancelled: asyncio.Event) -> str | None:
        lease_lost = asyncio.Event()
        keeper = asyncio.create_task(self._keep_lease(claimed, cancelled, lease_lost))
        work = asyncio.create_task(self._work(claimed))
        stop_cancel = asyncio.create_task(cancelled.wait())
        stop_lost = asyncio.create_task(lease_lost.wait())
        try:
            await asyncio.wait({work, stop_cancel, stop_lost}, return_when=asyncio.FIRST_COMPLETED)
            if work.done():
                outcome = _outcome_of(work)
            else:
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
                if lease_lost.is_set():
                    log.warning(
                        "run %s: lease lost; another worker or the reconciler owns it",
                        claimed.run_id,
                    )
                    return None
                outcome = Outcome("cancelled")
            return await self._finish(claimed, outcome)
        except asyncio.CancelledError:
            # The worker is shutting down: give the run back for another attempt.
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
            await self._release(claimed, "worker shutting down")
            raise
        finally:
            for task in (keeper, stop_cancel, stop_lost):
                task.cancel()
            await asyncio.gather(keeper, stop_cancel, stop_lost, return_exceptions=True)

    async def _keep_lease(
        self, claimed: ClaimedRun, cancelled: asyncio.Event, lost: asyncio.Event
    ) -> None:
        """Renews the lease; each renewal also polls for a cancel request."""
        while True:
            await asyncio.sleep(self.settings.renew_seconds)
            try:
                async with self.pool.connection() as conn:
                    state = await renew_lease(
                        conn,
                        claimed.run_id,
                        claimed.lease_token,
                        lease_seconds=self.settings.lease_seconds,
                    )
            except LeaseLost:
                lost.set()
                return
            except Exception:  # a passing database error: try again next interval
                log.exception("run %s: lease renewal failed", claimed.run_id)
                continue
            if state.status == "cancel_requested":
                cancelled.set()

    async def _work(self, claimed: ClaimedRun) -> Outcome:
        events = EventWriter(self.pool, claimed, self.settings.flush_seconds)
        try:
            outcome = await self._run_graph(claimed, events)
        except RunFailure as failure:
            await events.error(failure.error_type, str(failure))
            outcome = Outcome("failed", error_type=failure.error_type, error_message=str(failure))
        except asyncio.CancelledError:
            # cancelled (by a cancel request or shutdown): keep what was streamed so far
            with contextlib.suppress(Exception):
                await asyncio.shield(events.flush())
            raise
        except LeaseLost:
            raise
        except Exception as error:  # the agent, model or a tool failed
            log.info("run %s failed: %s: %s", claimed.run_id, type(error).__name__, error)
            await events.error(type(error).__name__, str(error))
            outcome = Outcome("failed", error_type=type(error).__name__, error_message=str(error))
        outcome.events = await events.take()
        return outcome

    async def _run_graph(self, claimed: ClaimedRun, events: EventWriter) -> Outcome:
        async with self.pool.connection() as conn:
            run = await load_execution_input(conn, claimed.run_id)
        if run.identity_error:
            raise RunFailure("run_identity", run.identity_error)
        try:
            agent = get_backend(run.backend_id or "")
        except UnknownBackend as error:
            raise RunFailure("agent_backend", str(error)) from None

        prepared = await prepare_agent_runtime_context(
            agent, run, catalog=self.catalog, home=self.settings.home
        )
        context = prepared.context
        manifest = build_manifest(prepared, run)
        # The manifest is written once; the same call reads the run's identity again:
        # the conversation or agent may have changed while we prepared.
        try:
            async with self.pool.connection() as conn:
                current = await commit_manifest(
                    conn,
                    claimed.run_id,
                    claimed.lease_token,
                    manifest=manifest,
                    fingerprint=manifest_fingerprint(manifest),
                )
        except ManifestConflict as error:
            raise RunFailure("manifest_conflict", str(error)) from None
        if current.identity_error:
            raise RunFailure("run_identity", current.identity_error)
        if current.backend_id != run.backend_id:
            raise RunFailure(
                "agent_changed",
                f"agent {run.agent_slug} changed backend from {run.backend_id} to "
                f"{current.backend_id} while the run was being prepared",
            )

        await asyncio.to_thread(Path(context.workdir).mkdir, parents=True, exist_ok=True)
        await events.add(RunEvent("metadata", _metadata(claimed, context)))
        graph = await agent.get_graph(context, checkpointer=self.checkpointer)
        config: RunnableConfig = {
            "configurable": {"thread_id": _checkpoint_thread(run)},
            "recursion_limit": max(context.max_execution_steps, 1) * 2 + 1,
        }
        graph_input = await _graph_input(graph, config, run, claimed.attempt_no)
        produced: list[BaseMessage] = []
        interrupts: list[Interrupt] = []
        # the task tool's calls become child runs executed by this worker
        delegating = current_delegate.set(ChildRuns(self, claimed, run.uid))
        try:
            async for part in graph.astream(
                graph_input,
                config,
                context=context,
                stream_mode=["messages", "updates"],
                version="v2",
            ):
                if part["type"] == "messages":
                    chunk, _meta = part["data"]
                    if isinstance(chunk, AIMessage) and _text(chunk):
                        await events.message_chunk(chunk.id, _text(chunk))
                elif part["type"] == "updates":
                    for node, update in part["data"].items():
                        if node == "__interrupt__":
                            interrupts.extend(_interrupt(i) for i in update)
                            continue
                        for message in _messages_of(update):
                            produced.append(message)
                            await events.tool_activity(message)
        finally:
            current_delegate.reset(delegating)

        if interrupts:
            await events.add(
                RunEvent(
                    "interrupt",
                    {"interrupts": [{"id": i.id, "value": _jsonable(i.value)} for i in interrupts]},
                )
            )
            return Outcome("interrupted", [_stored(m) for m in produced])
        if not any(isinstance(m, AIMessage) for m in produced):
            raise RunFailure("no_output", "the agent finished without a reply")
        return Outcome("completed", [_stored(m) for m in produced])

    async def _finish(self, claimed: ClaimedRun, outcome: Outcome) -> str | None:
        try:
            async with self.pool.connection() as conn:
                run = await finish_run(
                    conn,
                    claimed.run_id,
                    claimed.lease_token,
                    status=outcome.status,
                    messages=outcome.messages,
                    error_type=outcome.error_type,
                    error_message=outcome.error_message,
                    notify_after_commit=True,
                    events=outcome.events,
                )
            return run.status
        except LeaseLost:
            log.warning("run %s: lease lost before it could finish", claimed.run_id)
            return None

    async def _release(self, claimed: ClaimedRun, reason: str) -> None:
        try:
            async with self.pool.connection() as conn:
                await release_run(conn, claimed.run_id, claimed.lease_token, reason=reason)
        except LeaseLost:
            log.warning("run %s: lease lost before it could be released", claimed.run_id)


class EventWriter:
    """Buffers a run's events and appends them in batches, in order: message chunks are
    coalesced, and pending events are written at most ``flush_seconds`` after the first
    of them arrived. What is left at the end goes into the run's finishing transaction
    (``take``), so a short run writes all its events with its finish."""

    def __init__(self, pool: AsyncConnectionPool[Any], claimed: ClaimedRun, flush_seconds: float):
        self._pool = pool
        self._claimed = claimed
        self._flush_seconds = flush_seconds
        self._pending: list[RunEvent] = []
        self._chunks: list[dict[str, Any]] = []
        self._timer: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def add(self, event: RunEvent) -> None:
        self._close_chunks()
        self._pending.append(event)
        self._schedule()

    async def message_chunk(self, message_id: str | None, text: str) -> None:
        if self._chunks and self._chunks[-1]["message_id"] == message_id:
            self._chunks[-1]["text"] += text
        else:
            self._chunks.append({"message_id": message_id, "text": text})
        self._schedule()

    async def tool_activity(self, message: BaseMessage) -> None:
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = [
                {"id": c["id"], "name": c["name"], "args": c["args"]} for c in message.tool_calls
            ]
            await self.add(RunEvent("tool", {"type": "call", "calls": calls}))
        elif isinstance(message, ToolMessage):
            await self.add(
                RunEvent(
                    "tool",
                    {
                        "type": "result",
                        "tool_call_id": message.tool_call_id,
                        "name": message.name,
                        "status": message.status,
                        "content": _text(message),
                    },
                )
            )

    async def error(self, error_type: str, message: str) -> None:
        await self.add(RunEvent("error", {"error_type": error_type, "message": message}))

    async def take(self) -> list[RunEvent]:
        """The events not written yet; the writer forgets them and stops its timer (a
        write already under way is waited for, never cut off mid-transaction)."""
        if self._timer is not None:
            if self._lock.locked():
                await asyncio.gather(self._timer, return_exceptions=True)
            else:
                self._timer.cancel()
            self._timer = None
        async with self._lock:
            self._close_chunks()
            pending, self._pending = self._pending, []
        return pending

    def _schedule(self) -> None:
        if self._timer is None or self._timer.done():
            self._timer = asyncio.create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(self._flush_seconds)
        try:
            await self.flush()
        except LeaseLost:
            pass  # the run's executor finds out on its next renewal or its finish
        except Exception:
            log.exception(
                "run %s: appending events failed; they go with the finish", self._claimed.run_id
            )

    def _close_chunks(self) -> None:
        if self._chunks:
            self._pending.append(RunEvent("messages", {"chunks": self._chunks}))
            self._chunks = []

    async def flush(self) -> None:
        async with self._lock:
            self._close_chunks()
            if not self._pending:
                return
            batch, self._pending = self._pending, []
            try:
                async with self._pool.connection() as conn:
                    await append_events(
                        conn,
                        self._claimed.run_id,
                        self._claimed.lease_token,
                        batch,
                        notify_after_commit=True,
                    )
            except Exception:
                self._pending[:0] = batch  # keep them, in order, for the next write
                raise


def _outcome_of(work: asyncio.Task[Outcome]) -> Outcome:
    error = work.exception()
    if isinstance(error, LeaseLost):
        raise error
    if error is not None:
        return Outcome("failed", error_type=type(error).__name__, error_message=str(error))
    return work.result()


def _checkpoint_thread(run: ExecutionInput) -> str:
    # a subagent keeps its own checkpoint thread; files stay with the conversation
    return str(run.run_id) if run.run_type == "subagent" else str(run.thread_id)


async def _graph_input(
    graph: Any, config: RunnableConfig, run: ExecutionInput, attempt_no: int
) -> Any:
    """What to stream: the run's input, or nothing when an earlier attempt of this run
    already checkpointed it and left work pending (the retry continues from there)."""
    retry = attempt_no > 1
    state = await graph.aget_state(config) if retry or run.run_type == "resume" else None
    if run.run_type == "resume":
        assert state is not None
        if retry and state.next and not state.interrupts:
            return None  # the earlier attempt already answered the interrupt
        return Command(resume=resume_value(run.input_payload.get("resume"), state.interrupts))
    if run.run_type == "subagent":
        task = run.input_payload.get("task")
        text = task if isinstance(task, str) else json.dumps(run.input_payload, sort_keys=True)
    else:
        text = run.input_text or ""
    # a stable id: a re-sent input replaces itself instead of appearing twice
    message_id = f"yuxi-input-{run.run_id}"
    if state is not None and state.next:
        messages = state.values.get("messages") or []
        if any(getattr(message, "id", None) == message_id for message in messages):
            return None
    return {"messages": [{"role": "user", "content": text, "id": message_id}]}


def resume_value(value: Any, pending: tuple[Interrupt, ...] | list[Interrupt]) -> Any:
    """Translates the API's resume value for the pending interrupt(s).

    An approval (``{"decision": "approve"|"reject", "message"?}``) answers every tool
    call of a human-in-the-loop request; anything else (e.g. the answer to ``ask_user``)
    is passed as it is. Several pending interrupts get the same answer, keyed by id.
    """

    def answer(interrupt: Interrupt) -> Any:
        request = interrupt.value
        if isinstance(request, dict) and "action_requests" in request and isinstance(value, dict):
            if "decisions" in value:
                return value
            decision: dict[str, Any] = {"type": value.get("decision", "reject")}
            if decision["type"] == "reject" and value.get("message"):
                decision["message"] = str(value["message"])
            return {"decisions": [decision for _ in request["action_requests"]]}
        return value

    if len(pending) == 1:
        return answer(pending[0])
    if not pending:
        return value
    return {interrupt.id: answer(interrupt) for interrupt in pending}


def _interrupt(value: Any) -> Interrupt:
    # updates carry Interrupt objects or their dict form, depending on the stream version
    if isinstance(value, Interrupt):
        return value
    return Interrupt(value=value.get("value"), id=value.get("id", ""))


def _messages_of(update: Any) -> list[BaseMessage]:
    if not isinstance(update, dict):
        return []
    messages = update.get("messages") or []
    if not isinstance(messages, list):
        messages = [messages]
    return [m for m in messages if isinstance(m, (AIMessage, ToolMessage))]


def _stored(message: BaseMessage) -> OutputMessage:
    if isinstance(message, ToolMessage):
        return OutputMessage(
            "tool",
            _text(message),
            {
                "name": message.name,
                "tool_call_id": message.tool_call_id,
                "status": message.status,
            },
        )
    metadata: dict[str, Any] = {}
    if isinstance(message, AIMessage) and message.tool_calls:
        metadata["tool_calls"] = [
            {"id": c["id"], "name": c["name"], "args": c["args"]} for c in message.tool_calls
        ]
    return OutputMessage("assistant", _text(message), metadata)


def _text(message: BaseMessage) -> str:
    # .text is a str-like accessor in langchain-core 1.x; store and send plain str
    return str(message.text)


def _metadata(claimed: ClaimedRun, context: BaseContext) -> dict[str, Any]:
    return {
        "run_id": str(claimed.run_id),
        "thread_id": str(claimed.thread_id),
        "attempt": claimed.attempt_no,
        "model": context.model,
        "tool_approval_mode": context.tool_approval_mode,
        "workdir": context.workdir,
    }


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
