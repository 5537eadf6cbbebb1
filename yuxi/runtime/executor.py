"""Executing one run end to end, under its lease.

claim → prepare the Context (renewing the lease) → commit manifest v2 → re-check the
run's identity → build the graph → stream it with the PostgreSQL checkpointer, appending
events → store the assistant messages and finish the run in one transaction.

Cancellation: a committed cancel request reaches the executor by NOTIFY (the process's
CancelWatcher) and, as a fallback, through each lease renewal; the graph task is
cancelled and the run ends `cancelled`. A cancel that arrives while the Context is being
prepared is honoured the same way: the graph never starts.

The run loop lives here; the events it writes are batched by ``events.EventWriter``, and
what goes into and comes out of the graph is translated by ``graph_io``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Interrupt
from psycopg_pool import AsyncConnectionPool

from yuxi.agents.context import BaseContext
from yuxi.agents.delegation import current_delegate
from yuxi.agents.memory import current_run_memory
from yuxi.agents.models import RegisteredModel, model_capabilities
from yuxi.agents.models.usage import current_call_gate, current_text, current_usage
from yuxi.agents.registry import UnknownBackend, get_backend
from yuxi.db.outages import Backoff, describe, is_connection_error
from yuxi.files.attachments import image_blocks
from yuxi.files.layout import conversation_workdir, user_workspace
from yuxi.files.memory import LeasedRunMemory
from yuxi.files.workspace import ClientPaths
from yuxi.models.budget import RunBudget
from yuxi.models.secret_box import SecretBox
from yuxi.models.usage import RunUsage
from yuxi.queue.errors import InsufficientCredits, LeaseLost, ManifestConflict, RunNotClaimable
from yuxi.queue.events import RunEvent
from yuxi.queue.mcp import mcp_server_connections
from yuxi.queue.runs import (
    ClaimedExecution,
    ClaimedRun,
    ExecutionInput,
    ManifestCommit,
    OutputMessage,
    run_claim_execution,
    run_commit_manifest,
    run_finish,
    run_get,
    run_release,
    run_renew_lease,
    run_retry,
)
from yuxi.queue.statuses import RunStatus
from yuxi.resources import DatabaseCatalog, ResourceCatalog
from yuxi.runtime.cancel import CancelWatcher
from yuxi.runtime.child_runs import ChildRuns
from yuxi.runtime.events import EventWriter
from yuxi.runtime.graph_io import (
    graph_input,
    interrupt_of,
    interrupt_payload,
    messages_of,
    metadata_payload,
    stored_message,
    text_of,
)
from yuxi.runtime.manifest import build_manifest, manifest_fingerprint
from yuxi.runtime.prepare import (
    prepare_agent_runtime_context,
)

log = logging.getLogger("yuxi.runtime")

# The error type of a run failed because its worker lost the database with no retry
# budget left (yuxi.run_retry).
DATABASE_UNAVAILABLE = "database_unavailable"


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
    # the attempt was cut by a lost database connection: yuxi.run_retry decides between
    # another attempt and failing with error_type
    retry: bool = False


def _cut_by_outage(error: BaseException) -> Outcome:
    return Outcome(
        RunStatus.FAILED,
        error_type=DATABASE_UNAVAILABLE,
        # the error's own text names the server (host, socket path): it stays in the log
        error_message=f"the worker lost its connection to the database ({type(error).__name__})",
        retry=True,
    )


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
        self._secrets: SecretBox | None = None

    async def execute(self, run_id: UUID) -> str | None:
        """Runs ``run_id`` if it can be claimed; returns its final status (``pending``
        when it was given back for another attempt), or None when another delivery
        already has it. Cancelling this coroutine (worker shutdown) releases the run for
        another attempt."""
        started = await self._claim(run_id)
        if started is None:
            return None
        claimed, run = started
        with self.watcher.watch(run_id) as cancelled:
            return await self._execute_claimed(claimed, run, cancelled)

    async def _claim(self, run_id: UUID) -> tuple[ClaimedExecution, ExecutionInput] | None:
        """The claim, with what the run needs to execute (one call)."""
        # A claim that cannot reach the database is tried again until it can: the run
        # stays pending meanwhile, and a delivery elsewhere may claim it first.
        backoff = Backoff()
        while True:
            try:
                async with self.pool.connection() as conn:
                    return await run_claim_execution(
                        conn,
                        run_id,
                        worker=self.settings.worker_name,
                        lease_seconds=self.settings.lease_seconds,
                    )
            except RunNotClaimable as error:
                log.info("run %s not claimed: %s", run_id, error)
                return None
            except Exception as error:
                if not is_connection_error(error):
                    raise
                if backoff.failures == 0:
                    log.warning(
                        "run %s: cannot reach the database to claim it (%s)",
                        run_id,
                        describe(error),
                    )
                await asyncio.sleep(backoff.next())

    async def _execute_claimed(
        self, claimed: ClaimedExecution, run: ExecutionInput, cancelled: asyncio.Event
    ) -> str | None:
        lease_lost = asyncio.Event()
        home = self.settings.home
        paths = ClientPaths(home, user_workspace(home, str(claimed.uid)))
        events = EventWriter(self.pool, claimed, self.settings.flush_seconds)
        usage = RunUsage()
        keeper = asyncio.create_task(self._keep_lease(claimed, cancelled, lease_lost))
        work = asyncio.create_task(self._work(claimed, run, events, paths, usage))
        stop_cancel = asyncio.create_task(cancelled.wait())
        stop_lost = asyncio.create_task(lease_lost.wait())
        try:
            await asyncio.wait({work, stop_cancel, stop_lost}, return_when=asyncio.FIRST_COMPLETED)
            if work.done():
                outcome = _outcome_of(work, paths)
            else:
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
                if lease_lost.is_set():
                    log.warning(
                        "run %s: lease lost; another worker or the reconciler owns it",
                        claimed.run_id,
                    )
                    return None
                outcome = Outcome(RunStatus.CANCELLED)
            return await self._finish(claimed, outcome, events, usage.finished())
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
        """Renews the lease; each renewal also polls for a cancel request. While the
        database cannot be reached it tries again sooner (jittered, up to 2 s apart), so
        the lease is renewed as soon as the database is back."""
        backoff = Backoff(cap=2.0)
        wait = self.settings.renew_seconds
        while True:
            await asyncio.sleep(wait)
            try:
                async with self.pool.connection() as conn:
                    state = await run_renew_lease(
                        conn,
                        claimed.run_id,
                        claimed.lease_token,
                        lease_seconds=self.settings.lease_seconds,
                    )
            except LeaseLost:
                lost.set()
                return
            except Exception as error:
                if not is_connection_error(error):  # not an outage: try again next interval
                    log.exception("run %s: lease renewal failed", claimed.run_id)
                    continue
                if backoff.failures == 0:
                    log.warning(
                        "run %s: lease renewal cannot reach the database (%s); retrying",
                        claimed.run_id,
                        describe(error),
                    )
                wait = min(backoff.next(), self.settings.renew_seconds)
                continue
            if backoff.failures:
                log.info("run %s: lease renewed again", claimed.run_id)
                backoff.reset()
            wait = self.settings.renew_seconds
            if state.status == RunStatus.CANCEL_REQUESTED:
                cancelled.set()

    async def _work(
        self,
        claimed: ClaimedExecution,
        run: ExecutionInput,
        events: EventWriter,
        paths: ClientPaths,
        usage: RunUsage,
    ) -> Outcome:
        try:
            return await self._run_graph(claimed, run, events, paths, usage)
        except RunFailure as failure:
            message = paths.hide(str(failure))
            await events.error(failure.error_type, message)
            return Outcome(RunStatus.FAILED, error_type=failure.error_type, error_message=message)
        except InsufficientCredits as error:
            # a model call refused by the run's budget (yuxi.credit_refreeze)
            await events.error(InsufficientCredits.code, str(error))
            return Outcome(
                RunStatus.FAILED, error_type=InsufficientCredits.code, error_message=str(error)
            )
        except asyncio.CancelledError:
            # cancelled (by a cancel request or shutdown): keep what was streamed so far
            with contextlib.suppress(Exception):
                await asyncio.shield(events.flush())
            raise
        except LeaseLost:
            raise
        except Exception as error:
            if is_connection_error(error):
                # not the run's fault: yuxi.run_retry gives it another attempt (budget
                # permitting) once the database answers again
                log.warning(
                    "run %s: cut by a lost database connection (%s)",
                    claimed.run_id,
                    describe(error),
                )
                return _cut_by_outage(error)
            # the agent, model or a tool failed. The message leaves the server: an
            # OSError's text names host paths, a provider's may echo the model's key
            message = paths.hide(str(error))
            log.info("run %s failed: %s: %s", claimed.run_id, type(error).__name__, message)
            await events.error(type(error).__name__, message)
            return Outcome(RunStatus.FAILED, error_type=type(error).__name__, error_message=message)

    async def _run_graph(
        self,
        claimed: ClaimedExecution,
        run: ExecutionInput,
        events: EventWriter,
        paths: ClientPaths,
        usage: RunUsage,
    ) -> Outcome:
        # what the run connects to (MCP servers) is closed when it ends, fails or is
        # cancelled
        async with contextlib.AsyncExitStack() as connections:
            return await self._prepare_and_stream(claimed, run, events, paths, usage, connections)

    async def _prepare_and_stream(
        self,
        claimed: ClaimedExecution,
        run: ExecutionInput,
        events: EventWriter,
        paths: ClientPaths,
        usage: RunUsage,
        connections: contextlib.AsyncExitStack,
    ) -> Outcome:
        if run.identity_error:
            raise RunFailure("run_identity", run.identity_error)
        if claimed.credit_error:
            # the claim could not freeze the first model call: nothing was spent
            raise RunFailure(InsufficientCredits.code, claimed.credit_error)
        try:
            agent = get_backend(run.backend_id or "")
        except UnknownBackend as error:
            raise RunFailure("agent_backend", str(error)) from None

        # known before preparing, which creates the workdir: an error doing so names it
        # as clients see it
        paths.workdir = str(
            conversation_workdir(self.settings.home, run.uid, run.thread_id, run.workdir_path)
        )
        prepared = await prepare_agent_runtime_context(
            agent, run, catalog=self._catalog_for(run), home=self.settings.home
        )
        context = prepared.context
        paths.workdir = context.workdir
        if (
            isinstance(context.registered_model, RegisteredModel)
            and context.registered_model.api_key
        ):
            paths.secrets.append(context.registered_model.api_key.get_secret_value())
        usage.spec = context.model
        manifest = build_manifest(prepared, run)
        metadata = RunEvent(
            "metadata", metadata_payload(claimed, context, paths.show(context.workdir))
        )
        # The manifest is written once; the same call reads the run's identity again (the
        # conversation or agent may have changed while we prepared) and, while it holds,
        # stores the attempt's metadata event.
        current = await self._commit_manifest(
            claimed, manifest, run.backend_id, [metadata], events.next_batch()
        )
        if current.identity_error:
            raise RunFailure("run_identity", current.identity_error)
        if current.backend_id != run.backend_id:
            raise RunFailure(
                "agent_changed",
                f"agent {run.agent_slug} changed backend from {run.backend_id} to "
                f"{current.backend_id} while the run was being prepared",
            )

        events.appended(current.last_event_seq)
        await self._connect_mcp(claimed, context, connections)
        graph = await agent.get_graph(context, checkpointer=self.checkpointer)
        config: RunnableConfig = {
            "configurable": {"thread_id": _checkpoint_thread(run)},
            "recursion_limit": max(context.max_execution_steps, 1) * 2 + 1,
        }
        first_input = await graph_input(
            graph, config, run, claimed.attempt_no, await _images_for(context, run)
        )
        produced: list[BaseMessage] = []
        interrupts: list[Interrupt] = []
        # the task tool's calls become child runs executed by this worker
        delegating = current_delegate.set(ChildRuns(self, claimed, run.uid))
        # every model call's tokens (summarisation included) reach this run's collector
        counting = current_usage.set(usage)
        # the agent's model calls stream their text into the run's events
        texting = current_text.set(events)
        # a run holding credits extends its freeze before each further model call
        gating = current_call_gate.set(
            None
            if claimed.credit_hold is None
            else RunBudget(self.pool, claimed.run_id, claimed.lease_token, usage)
        )
        # the memory tools check this run's identity and lease on every call
        remembering = current_run_memory.set(
            LeasedRunMemory(
                self.pool, claimed.run_id, claimed.uid, claimed.lease_token, paths.workspace
            )
        )
        try:
            # The models' text reaches the events through their own callback (current_text)
            # as they produce it; LangGraph's "messages" mode would call a handler for
            # every node and middleware step instead.
            async for part in graph.astream(
                first_input, config, context=context, stream_mode="updates", version="v2"
            ):
                updates: dict[str, Any] = part["data"]  # type: ignore[assignment]
                for node, update in updates.items():
                    if node == "__interrupt__":
                        interrupts.extend(interrupt_of(i) for i in update)
                        continue
                    for message in messages_of(update):
                        produced.append(message)
                        # a reply no model call streamed (a node wrote it): its text
                        # as one chunk, as LangGraph's "messages" mode would send it
                        if (
                            isinstance(message, AIMessage)
                            and message.id not in events.streamed
                            and text_of(message)
                        ):
                            events.message_chunk(message.id, text_of(message))
                        await events.tool_activity(message)
        finally:
            current_run_memory.reset(remembering)
            current_delegate.reset(delegating)
            current_usage.reset(counting)
            current_text.reset(texting)
            current_call_gate.reset(gating)

        if interrupts:
            await events.add(RunEvent("interrupt", interrupt_payload(interrupts)))
            return Outcome(RunStatus.INTERRUPTED, [stored_message(m) for m in produced])
        if not any(isinstance(m, AIMessage) for m in produced):
            raise RunFailure("no_output", "the agent finished without a reply")
        return Outcome(RunStatus.COMPLETED, [stored_message(m) for m in produced])

    async def _commit_manifest(
        self,
        claimed: ClaimedExecution,
        manifest: dict[str, Any],
        backend_id: str | None,
        first_events: list[RunEvent],
        batch: int,
    ) -> ManifestCommit:
        """``run_commit_manifest``, sent again while the database cannot be reached: the
        manifest is write-once (the same fingerprint is accepted again) and the events'
        batch is skipped once stored, so a commit whose reply was lost is not made twice.
        Nothing of the run has left the worker before it succeeds."""
        backoff = Backoff()
        while True:
            try:
                async with self.pool.connection() as conn:
                    return await run_commit_manifest(
                        conn,
                        claimed.run_id,
                        claimed.lease_token,
                        manifest=manifest,
                        fingerprint=manifest_fingerprint(manifest),
                        backend_id=backend_id,
                        events=first_events,
                        batch=batch,
                    )
            except ManifestConflict as error:
                raise RunFailure("manifest_conflict", str(error)) from None
            except Exception as error:
                if not is_connection_error(error):
                    raise
                if backoff.failures == 0:
                    log.warning(
                        "run %s: cannot reach the database to commit its manifest (%s);"
                        " sending it again",
                        claimed.run_id,
                        describe(error),
                    )
                await asyncio.sleep(backoff.next())

    def _catalog_for(self, run: ExecutionInput) -> ResourceCatalog:
        """The catalog answering from what the claim read (one query fewer per kind)."""
        if isinstance(self.catalog, DatabaseCatalog):
            return self.catalog.for_run(run.catalog)
        return self.catalog

    async def _connect_mcp(
        self, claimed: ClaimedRun, context: Any, connections: contextlib.AsyncExitStack
    ) -> None:
        """Connects to the run's MCP servers and binds their tools into the Context.
        The servers are read again here, where the secrets are opened: one disabled or
        no longer shared since preparation is left out."""
        visible = [s["slug"] for s in getattr(context, "_visible_mcp_servers", None) or []]
        required = list(getattr(context, "required_mcps", None) or [])
        if not visible and not required:
            return
        # FastMCP and langchain.mcp load with the first run that has MCP servers
        from yuxi.mcp.session import McpServerSpec, McpSession, McpUnavailable

        async with self.pool.connection() as conn:
            rows = await mcp_server_connections(conn, claimed.uid, visible) if visible else []
        usable = {row.slug for row in rows}
        for slug in required:
            if slug not in usable:
                raise RunFailure(
                    "mcp_unavailable",
                    f"MCP server {slug} is required by the agent but is not available to this user",
                )
        box = self._secret_box()
        specs = [McpServerSpec.opened(box, row) for row in rows]
        try:
            session = await connections.enter_async_context(McpSession(specs, required=required))
        except McpUnavailable as error:
            raise RunFailure("mcp_unavailable", str(error)) from None
        context._mcp_tools = session.tools

    def _secret_box(self) -> SecretBox:
        if self._secrets is None:
            self._secrets = SecretBox.from_env(self.settings.home)
        return self._secrets

    async def _finish(
        self,
        claimed: ClaimedRun,
        outcome: Outcome,
        events: EventWriter,
        usage: list[dict[str, Any]] | None = None,
    ) -> str | None:
        """Ends the attempt (run_finish, or run_retry after an outage). While the database
        cannot be reached it tries again, with the same events and outcome, as long as
        the lease holds; a finish whose reply was lost is known by the lease that the
        retry finds gone."""
        backoff = Backoff()
        unsure = False
        while True:
            try:
                remaining = await events.remaining()
                if outcome.retry and remaining:
                    await events.flush()  # what the attempt streamed stays in its events
                async with self.pool.connection() as conn:
                    if outcome.retry:
                        run = await run_retry(
                            conn,
                            claimed.run_id,
                            claimed.lease_token,
                            error_type=outcome.error_type or DATABASE_UNAVAILABLE,
                            error_message=outcome.error_message or "",
                            notify_after_commit=True,
                        )
                    else:
                        run = await run_finish(
                            conn,
                            claimed.run_id,
                            claimed.lease_token,
                            status=outcome.status,
                            messages=outcome.messages,
                            error_type=outcome.error_type,
                            error_message=outcome.error_message,
                            notify_after_commit=True,
                            events=remaining,
                            usage=usage or (),
                            announce_from=events.unannounced_from,
                        )
                if backoff.failures:
                    log.info("run %s: ended after the database came back", claimed.run_id)
                if run.status == RunStatus.PENDING:
                    log.info("run %s: given back for another attempt", claimed.run_id)
                return run.status
            except LeaseLost:
                return await self._lost_before_end(claimed, unsure)
            except Exception as error:
                if not is_connection_error(error):
                    raise
                unsure = True
                if backoff.failures == 0:
                    log.warning(
                        "run %s: cannot reach the database to end the run (%s); retrying",
                        claimed.run_id,
                        describe(error),
                    )
                await asyncio.sleep(backoff.next())

    async def _lost_before_end(self, claimed: ClaimedRun, unsure: bool) -> str | None:
        if unsure:
            # a write whose reply was lost may have been ours: say what the run is now
            with contextlib.suppress(Exception):
                async with self.pool.connection() as conn:
                    run = await run_get(conn, claimed.run_id)
                log.warning(
                    "run %s: the lease was gone when the database answered again; run is %s",
                    claimed.run_id,
                    run.status,
                )
                return None
        log.warning("run %s: lease lost before it could finish", claimed.run_id)
        return None

    async def _release(self, claimed: ClaimedRun, reason: str) -> None:
        try:
            async with self.pool.connection() as conn:
                await run_release(conn, claimed.run_id, claimed.lease_token, reason=reason)
        except LeaseLost:
            log.warning("run %s: lease lost before it could be released", claimed.run_id)
        except Exception as error:
            if not is_connection_error(error):
                raise
            # its lease runs out and the reconciler gives it another attempt or fails it
            log.warning(
                "run %s: could not be released, the database is unreachable (%s)",
                claimed.run_id,
                describe(error),
            )


def _outcome_of(work: asyncio.Task[Outcome], paths: ClientPaths) -> Outcome:
    error = work.exception()
    if isinstance(error, LeaseLost):
        raise error
    if error is not None:
        if is_connection_error(error):
            return _cut_by_outage(error)
        return Outcome(
            RunStatus.FAILED, error_type=type(error).__name__, error_message=paths.hide(str(error))
        )
    return work.result()


async def _images_for(context: BaseContext, run: ExecutionInput) -> list[dict[str, Any]]:
    """The images the input message refers to, as content blocks, when the run's model
    has vision (else none: the prompt lists every attachment by its path)."""
    if not run.input_attachments:
        return []
    registered = context.registered_model
    capabilities = (
        registered.capabilities
        if isinstance(registered, RegisteredModel)
        else model_capabilities(context.model)
    )
    if not capabilities.vision:
        return []
    return await asyncio.to_thread(
        image_blocks, Path(context.workdir), run.attachments, run.input_attachments
    )


def _checkpoint_thread(run: ExecutionInput) -> str:
    # a subagent keeps its own checkpoint thread; files stay with the conversation
    return str(run.run_id) if run.run_type == "subagent" else str(run.thread_id)
