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
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Interrupt
from psycopg_pool import AsyncConnectionPool

from yuxi.agents.base import BaseAgent
from yuxi.agents.context import BaseContext
from yuxi.agents.graphs import GraphAgent
from yuxi.agents.models import RegisteredModel, model_capabilities
from yuxi.agents.registry import UnknownBackend, get_backend
from yuxi.agents.services import KnowledgeAccess, RunServices, run_services
from yuxi.db.outages import Backoff, describe, is_connection_error, until_reachable
from yuxi.files.attachments import image_blocks
from yuxi.files.cache import TreeCache
from yuxi.files.layout import WORKSPACE_OWN_TREES, user_workspace
from yuxi.files.memory import LeasedRunMemory
from yuxi.files.store import FileStore, PostgresFileStore
from yuxi.files.workspace import AGENTS_FILE, ClientPaths
from yuxi.models.budget import RunBudget
from yuxi.models.secret_box import SecretBox
from yuxi.models.usage import RunUsage
from yuxi.queue.errors import InsufficientCredits, LeaseLost, ManifestConflict, RunNotClaimable
from yuxi.queue.events import RunEvent, StoredEvent, run_events_after
from yuxi.queue.mcp import mcp_server_connections
from yuxi.queue.runs import (
    ManifestCommit,
    OutputMessage,
    Run,
    RunClaim,
    RunLease,
    run_claim_execution,
    run_commit_manifest,
    run_finish,
    run_get,
    run_release,
    run_renew_lease,
    run_retry,
)
from yuxi.queue.statuses import RunStatus
from yuxi.resources import ResourceCatalog
from yuxi.runtime.cancel import CancelWatcher
from yuxi.runtime.child_runs import ChildRuns
from yuxi.runtime.events import EventWriter
from yuxi.runtime.graph_io import (
    final_values_text,
    graph_input,
    interrupt_of,
    interrupt_payload,
    messages_of,
    metadata_payload,
    produced_since,
    resumed,
    stored_message,
    text_of,
)
from yuxi.runtime.manifest import build_manifest, manifest_fingerprint
from yuxi.runtime.prepare import PreparedContext, prepare_agent_runtime_context, run_workdir
from yuxi.runtime.state import RUN_KEY
from yuxi.runtime.store import with_user_store
from yuxi.runtime.tool_calls import RunToolCalls

log = logging.getLogger("yuxi.runtime")

# The error type of a run failed because its worker lost the database with no retry
# budget left (yuxi.run_retry).
DATABASE_UNAVAILABLE = "database_unavailable"
# the causes of an attempt cut by an error (yuxi.run_retry's p_cause)
INFRASTRUCTURE = "infrastructure"
AGENT = "agent"
# failures another attempt would only repeat: not retried within max_run_attempts
_NOT_RETRIED = frozenset({"GraphRecursionError"})


@dataclass(frozen=True)
class ExecutorSettings:
    worker_name: str
    home: Path
    lease_seconds: float = 60.0
    renew_seconds: float = 10.0
    # message chunks are flushed as one `messages` event at most this often
    flush_seconds: float = 0.1
    # attempts given back for causes outside the agent before a run fails
    infra_retries: int = 3


@dataclass
class Outcome:
    status: str
    messages: list[OutputMessage] = field(default_factory=list)
    error_type: str | None = None
    error_message: str | None = None
    # the attempt was cut by an error yuxi.run_retry decides on (another attempt, or
    # failing with error_type): "infrastructure" (a lost database connection, not the
    # agent's fault) or "agent" (the agent, its model or a tool failed)
    retry: str | None = None


def _cut_by_outage(error: BaseException) -> Outcome:
    return Outcome(
        RunStatus.FAILED,
        error_type=DATABASE_UNAVAILABLE,
        # the error's own text names the server (host, socket path): it stays in the log
        error_message=f"the worker lost its connection to the database ({type(error).__name__})",
        retry=INFRASTRUCTURE,
    )


class RunFailure(Exception):
    """A run cannot go on; ends it `failed` with this error type and message."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


class RunExecutor:
    """Executes runs for one worker process. Safe to call concurrently for different runs.

    One run, as ``execute`` tells it: claim → prepare the Context → commit the manifest
    → bind the run's services and connections → stream the graph → finish. Every call
    to the database in that story outlives an outage (``until_reachable``): the claim,
    the manifest and the finish are each safe to send twice."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        checkpointer: BaseCheckpointSaver[Any],
        catalog: ResourceCatalog,
        watcher: CancelWatcher,
        settings: ExecutorSettings,
        knowledge: KnowledgeAccess | None = None,
        files: FileStore | None = None,
        store: BaseStore | None = None,
    ) -> None:
        self.pool = pool
        self.checkpointer = checkpointer
        self.catalog = catalog
        self.watcher = watcher
        self.settings = settings
        # what the search_knowledge tool of every run searches through
        self.knowledge = knowledge
        # where every file lives; the directories under the home are its cache
        self.files = files or PostgresFileStore(pool)
        # LangGraph's store: every graph gets it, seen as the run's user (UserStore)
        self.store = store
        self._secrets: SecretBox | None = None

    async def execute(self, run_id: UUID) -> str | None:
        """Runs ``run_id`` if it can be claimed; returns its final status (``pending``
        when it was given back for another attempt), or None when another delivery
        already has it. Cancelling this coroutine (worker shutdown) releases the run for
        another attempt."""
        claim = await self._claim(run_id)
        if claim is None:
            return None
        with self.watcher.watch(run_id) as cancelled:
            return await self._execute_claimed(claim, cancelled)

    async def _claim(self, run_id: UUID) -> RunClaim | None:
        """The claim, with what the run needs to execute (one call). One that cannot
        reach the database is tried again until it can: the run stays pending meanwhile,
        and a delivery elsewhere may claim it first."""

        async def claim() -> RunClaim:
            async with self.pool.connection() as conn:
                return await run_claim_execution(
                    conn,
                    run_id,
                    worker=self.settings.worker_name,
                    lease_seconds=self.settings.lease_seconds,
                )

        try:
            return await until_reachable(claim, log=log, what=f"claim run {run_id}")
        except RunNotClaimable as error:
            log.info("run %s not claimed: %s", run_id, error)
            return None

    async def _execute_claimed(self, claim: RunClaim, cancelled: asyncio.Event) -> str | None:
        lease_lost = asyncio.Event()
        home = self.settings.home
        paths = ClientPaths(home, user_workspace(home, claim.run.uid))
        events = EventWriter(self.pool, claim.lease, self.settings.flush_seconds)
        usage = RunUsage()
        keeper = asyncio.create_task(self._keep_lease(claim.lease, cancelled, lease_lost))
        work = asyncio.create_task(self._work(claim, events, paths, usage))
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
                        claim.run.run_id,
                    )
                    return None
                outcome = Outcome(RunStatus.CANCELLED)
            return await self._finish(claim.lease, outcome, events, usage.finished())
        except asyncio.CancelledError:
            # The worker is shutting down: give the run back for another attempt.
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
            await self._release(claim.lease, "worker shutting down")
            raise
        finally:
            for task in (keeper, stop_cancel, stop_lost):
                task.cancel()
            await asyncio.gather(keeper, stop_cancel, stop_lost, return_exceptions=True)

    async def _keep_lease(
        self, lease: RunLease, cancelled: asyncio.Event, lost: asyncio.Event
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
                        conn, lease.run_id, lease.token, lease_seconds=self.settings.lease_seconds
                    )
            except LeaseLost:
                lost.set()
                return
            except Exception as error:
                if not is_connection_error(error):  # not an outage: try again next interval
                    log.exception("run %s: lease renewal failed", lease.run_id)
                    continue
                if backoff.failures == 0:
                    log.warning(
                        "run %s: lease renewal cannot reach the database (%s); retrying",
                        lease.run_id,
                        describe(error),
                    )
                wait = min(backoff.next(), self.settings.renew_seconds)
                continue
            if backoff.failures:
                log.info("run %s: lease renewed again", lease.run_id)
                backoff.reset()
            wait = self.settings.renew_seconds
            if state.status == RunStatus.CANCEL_REQUESTED:
                cancelled.set()

    async def _work(
        self, claim: RunClaim, events: EventWriter, paths: ClientPaths, usage: RunUsage
    ) -> Outcome:
        """The run's story, from preparation to its last graph step; how it ended as an
        Outcome (the run's own failures are its outcome, never raised)."""
        run_id = claim.run.run_id
        try:
            # what the run connects to (MCP servers) is closed when it ends, fails or is
            # cancelled
            async with contextlib.AsyncExitStack() as connections:
                trees = await self._sync(claim)
                agent, prepared = await self._prepare(claim, paths, usage, trees)
                await self._commit(claim, prepared, events, paths)
                graph, lent = await self._bind(
                    claim, agent, prepared, events, usage, connections, trees
                )
                with run_services(lent):
                    outcome = await self._stream(claim, graph, prepared.context, events, agent)
                if trees.workdir is not None:  # what was written there directly
                    await trees.workdir.push(writer_uid=claim.run.uid, writer_run=run_id)
                return outcome
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
                    "run %s: cut by a lost database connection (%s)", run_id, describe(error)
                )
                return _cut_by_outage(error)
            # the agent, model or a tool failed: another attempt within the agent's
            # max_run_attempts continues from the checkpoint (yuxi.run_retry writes the
            # error event if there is none left). The message leaves the server: an
            # OSError's text names host paths, a provider's may echo the model's key
            message = paths.hide(str(error))
            kind = type(error).__name__
            log.info("run %s failed: %s: %s", run_id, kind, message)
            if kind in _NOT_RETRIED:
                await events.error(kind, message)
                return Outcome(RunStatus.FAILED, error_type=kind, error_message=message)
            return Outcome(RunStatus.FAILED, error_type=kind, error_message=message, retry=AGENT)

    async def _sync(self, claim: RunClaim) -> RunTrees:
        """Brings this host's cache of the run's workspace and workdir trees up to the
        versions the claim saw (nothing to do when it saw them already)."""
        run, files = claim.run, claim.files
        if files is None:
            return RunTrees()
        workspace_dir = user_workspace(self.settings.home, run.uid)
        workspace = TreeCache(
            self.files,
            self.settings.home,
            run.uid,
            files.workspace.id,
            workspace_dir,
            skip=WORKSPACE_OWN_TREES,
        )
        await workspace.pull(files.workspace.version)
        if files.workdir is None:
            return RunTrees(workspace)
        workdir = TreeCache(
            self.files,
            self.settings.home,
            run.uid,
            files.workdir.id,
            workspace_dir / files.workdir.root,
        )
        await workdir.pull(files.workdir.version)
        return RunTrees(workspace, workdir)

    async def _prepare(
        self, claim: RunClaim, paths: ClientPaths, usage: RunUsage, trees: RunTrees
    ) -> tuple[BaseAgent, PreparedContext]:
        """The agent's backend and the run's Context, from what the claim read."""
        if claim.run.identity_error:
            raise RunFailure("run_identity", claim.run.identity_error)
        if claim.credit.error:
            # the claim could not freeze the first model call: nothing was spent
            raise RunFailure(InsufficientCredits.code, claim.credit.error)
        try:
            agent = get_backend(claim.agent.backend_id or "")
        except UnknownBackend as error:
            raise RunFailure("agent_backend", str(error)) from None
        # known before preparing, which creates the workdir: an error doing so names it
        # as clients see it
        paths.workdir = str(run_workdir(self.settings.home, claim))
        catalog = self.catalog.for_run(claim.catalog)  # answers from what the claim read
        prepared = await prepare_agent_runtime_context(
            agent, claim, catalog=catalog, home=self.settings.home
        )
        if prepared.template_written and trees.workspace is not None:
            await trees.workspace.wrote(AGENTS_FILE, writer_uid=claim.run.uid)
        context = prepared.context
        paths.workdir = context.workdir
        registered = context.registered_model
        if isinstance(registered, RegisteredModel) and registered.api_key:
            paths.secrets.append(registered.api_key.get_secret_value())
        usage.spec = context.model
        return agent, prepared

    async def _commit(
        self, claim: RunClaim, prepared: PreparedContext, events: EventWriter, paths: ClientPaths
    ) -> None:
        """Writes the manifest once. The same call reads the run's identity again (the
        conversation or agent may have changed while we prepared) and, while it holds,
        stores the attempt's ``metadata`` event. Nothing of the run has left the worker
        before it succeeds, so a commit whose reply was lost is sent again: the same
        fingerprint is accepted again and the events' batch is skipped once stored."""
        manifest = build_manifest(prepared, claim)
        context = prepared.context
        metadata = RunEvent(
            "metadata", metadata_payload(claim, context, paths.show(context.workdir))
        )
        batch = events.next_batch()

        async def commit() -> ManifestCommit:
            async with self.pool.connection() as conn:
                return await run_commit_manifest(
                    conn,
                    claim.lease.run_id,
                    claim.lease.token,
                    manifest=manifest,
                    fingerprint=manifest_fingerprint(manifest),
                    backend_id=claim.agent.backend_id,
                    events=[metadata],
                    batch=batch,
                )

        try:
            current = await until_reachable(
                commit, log=log, what=f"commit run {claim.run.run_id}'s manifest"
            )
        except ManifestConflict as error:
            raise RunFailure("manifest_conflict", str(error)) from None
        if current.identity_error:
            raise RunFailure("run_identity", current.identity_error)
        if current.backend_id != claim.agent.backend_id:
            raise RunFailure(
                "agent_changed",
                f"agent {claim.run.agent_slug} changed backend from {claim.agent.backend_id} to "
                f"{current.backend_id} while the run was being prepared",
            )
        events.appended(current.last_event_seq)

    async def _bind(
        self,
        claim: RunClaim,
        agent: BaseAgent,
        prepared: PreparedContext,
        events: EventWriter,
        usage: RunUsage,
        connections: contextlib.AsyncExitStack,
        trees: RunTrees,
    ) -> tuple[CompiledStateGraph[Any, Any, Any, Any], RunServices]:
        """The run's MCP connections and graph, and the services its tools and models
        are lent while it streams."""
        context = prepared.context
        await self._connect_mcp(claim, context, connections)
        graph = await agent.get_graph(context, checkpointer=self.checkpointer)
        # the user's own namespaces of LangGraph's store, for get_store() and runtime.store
        graph = with_user_store(graph, self.store, claim.run.uid)
        lease = claim.lease
        lent = RunServices(
            delegate=ChildRuns(self, lease, claim.run.uid),
            usage=usage,
            text=events,
            call_gate=None
            if claim.credit.hold is None
            else RunBudget(self.pool, lease.run_id, lease.token, usage),
            memory=None
            if trees.workspace is None
            else LeasedRunMemory(
                self.pool, lease.run_id, claim.run.uid, lease.token, trees.workspace
            ),
            knowledge=self.knowledge,
            files=None
            if trees.workdir is None
            else WorkdirWrites(trees.workdir, claim.run.uid, lease.run_id),
            calls=RunToolCalls(self.pool, lease.run_id, lease.token),
        )
        return graph, lent

    async def _stream(
        self,
        claim: RunClaim,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        context: BaseContext,
        events: EventWriter,
        agent: BaseAgent,
    ) -> Outcome:
        """Streams the graph from the run's input to its end or an interrupt. A later
        attempt continues from the checkpoint its run's earlier attempts left: what they
        produced is not produced again, and what of it the run's events miss (written
        after their last batch) is sent first; a graph that already ended is not
        streamed at all.

        A project's graph (``GraphAgent``) gets its own context, not yuxi's; what it
        produced is read from its checkpoint (its nodes may return messages as dicts),
        and one that produced no AI message replies with its final values as JSON."""
        user_graph = isinstance(agent, GraphAgent)
        run_context = agent.run_context(graph) if isinstance(agent, GraphAgent) else context
        # a LangGraph client's own config.configurable keys (never Context fields)
        passed = claim.input.payload.get("configurable") or {}
        config: RunnableConfig = {
            "configurable": {**passed, "thread_id": _checkpoint_thread(claim)},
            "metadata": {RUN_KEY: str(claim.run.run_id)},
            "recursion_limit": max(context.max_execution_steps, 1) * 2 + 1,
        }
        if user_graph:  # who runs it, as LangGraph's server tells a graph
            config["configurable"]["langgraph_auth_user_id"] = str(claim.run.uid)
        earlier = await resumed(graph, config, claim) if claim.lease.attempt_no > 1 else None
        produced: list[BaseMessage] = []
        interrupts: list[Interrupt] = []
        if earlier is not None:
            await events.seen(await self._events_so_far(claim))
            for message in earlier.earlier:
                await _announce(events, message)
        if earlier is None or not earlier.ended:
            first_input = (
                None
                if earlier is not None
                else await graph_input(graph, config, claim, await _images_for(context, claim))
            )
            # The models' text reaches the events through their own callback (the
            # services' text) as they produce it; LangGraph's "messages" mode would call
            # a handler for every node and middleware step instead. Each step is
            # checkpointed before the next starts ("sync"): a tool call an attempt made
            # is never made again under another id.
            async for part in graph.astream(
                first_input,
                config,
                context=run_context,
                stream_mode="updates",
                version="v2",
                durability="sync",
            ):
                updates: dict[str, Any] = part["data"]  # type: ignore[assignment]
                for node, update in updates.items():
                    if node == "__interrupt__":
                        interrupts.extend(interrupt_of(i) for i in update)
                        continue
                    for message in messages_of(update):
                        produced.append(message)
                        await _announce(events, message)
        else:
            interrupts.extend(earlier.interrupts)
        if earlier is not None:
            # what the run produced over all its attempts, as the checkpoint holds it
            produced = produced_since(await graph.aget_state(config), earlier.before)
        elif user_graph:
            found = await resumed(graph, config, claim)
            produced = found.earlier if found is not None else produced
        if interrupts:
            await events.add(RunEvent("interrupt", interrupt_payload(interrupts)))
            return Outcome(RunStatus.INTERRUPTED, [stored_message(m) for m in produced])
        stored = [stored_message(m) for m in produced]
        if not any(isinstance(m, AIMessage) for m in produced):
            if not user_graph:
                raise RunFailure("no_output", "the agent finished without a reply")
            reply = final_values_text((await graph.aget_state(config)).values)
            events.message_chunk(f"yuxi-values-{claim.run.run_id}", reply)
            stored.append(OutputMessage("assistant", reply, {"graph_values": True}))
        return Outcome(RunStatus.COMPLETED, stored)

    async def _events_so_far(self, claim: RunClaim) -> list[StoredEvent]:
        """The events the run's earlier attempts wrote."""
        stored: list[StoredEvent] = []
        async with self.pool.connection() as conn:
            while True:
                page = await run_events_after(
                    conn, claim.run.run_id, stored[-1].seq if stored else 0
                )
                stored.extend(page)
                if len(page) < 1000:
                    return stored

    async def _connect_mcp(
        self, claim: RunClaim, context: BaseContext, connections: contextlib.AsyncExitStack
    ) -> None:
        """Connects to the run's MCP servers and binds their tools into the Context.
        The servers are read again here, where the secrets are opened: one disabled or
        no longer shared since preparation is left out."""
        visible = [s["slug"] for s in context.resolved.mcp_servers]
        required = list(getattr(context, "required_mcps", None) or [])
        if not visible and not required:
            return
        # FastMCP and langchain.mcp load with the first run that has MCP servers
        from yuxi.mcp.session import McpServerSpec, McpSession, McpUnavailable

        async with self.pool.connection() as conn:
            rows = await mcp_server_connections(conn, claim.run.uid, visible) if visible else []
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
            session = await connections.enter_async_context(
                McpSession(specs, required=required, run_id=str(claim.run.run_id))
            )
        except McpUnavailable as error:
            raise RunFailure("mcp_unavailable", str(error)) from None
        context.resolved.mcp_tools = list(session.tools)

    def _secret_box(self) -> SecretBox:
        if self._secrets is None:
            self._secrets = SecretBox.from_env(self.settings.home)
        return self._secrets

    async def _finish(
        self,
        lease: RunLease,
        outcome: Outcome,
        events: EventWriter,
        usage: list[dict[str, Any]] | None = None,
    ) -> str | None:
        """Ends the attempt (run_finish, or run_retry after an outage). While the database
        cannot be reached it tries again, with the same events and outcome, as long as
        the lease holds; a finish whose reply was lost is known by the lease that the
        retry finds gone."""

        async def finish() -> Run:
            remaining = await events.remaining()
            if outcome.retry and remaining:
                await events.flush()  # what the attempt streamed stays in its events
            async with self.pool.connection() as conn:
                if outcome.retry:
                    return await run_retry(
                        conn,
                        lease.run_id,
                        lease.token,
                        error_type=outcome.error_type or DATABASE_UNAVAILABLE,
                        error_message=outcome.error_message or "",
                        cause=outcome.retry,
                        infra_limit=self.settings.infra_retries,
                        notify_after_commit=True,
                    )
                return await run_finish(
                    conn,
                    lease.run_id,
                    lease.token,
                    status=outcome.status,
                    messages=outcome.messages,
                    error_type=outcome.error_type,
                    error_message=outcome.error_message,
                    notify_after_commit=True,
                    events=remaining,
                    usage=usage or (),
                    announce_from=events.unannounced_from,
                )

        backoff = Backoff()
        try:
            run = await until_reachable(
                finish, log=log, what=f"end run {lease.run_id}", backoff=backoff
            )
        except LeaseLost:
            return await self._lost_before_end(lease, unsure=backoff.failures > 0)
        if run.status == RunStatus.PENDING:
            log.info("run %s: given back for another attempt", lease.run_id)
        return run.status

    async def _lost_before_end(self, lease: RunLease, unsure: bool) -> str | None:
        if unsure:
            # a write whose reply was lost may have been ours: say what the run is now
            with contextlib.suppress(Exception):
                async with self.pool.connection() as conn:
                    run = await run_get(conn, lease.run_id)
                log.warning(
                    "run %s: the lease was gone when the database answered again; run is %s",
                    lease.run_id,
                    run.status,
                )
                return None
        log.warning("run %s: lease lost before it could finish", lease.run_id)
        return None

    async def _release(self, lease: RunLease, reason: str) -> None:
        try:
            async with self.pool.connection() as conn:
                await run_release(
                    conn,
                    lease.run_id,
                    lease.token,
                    reason=reason,
                    infra_limit=self.settings.infra_retries,
                )
        except LeaseLost:
            log.warning("run %s: lease lost before it could be released", lease.run_id)
        except Exception as error:
            if not is_connection_error(error):
                raise
            # its lease runs out and the reconciler gives it another attempt or fails it
            log.warning(
                "run %s: could not be released, the database is unreachable (%s)",
                lease.run_id,
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


async def _announce(events: EventWriter, message: BaseMessage) -> None:
    """The events of one message the graph produced: a reply no model call streamed (a
    node wrote it, or an earlier attempt's stream did not reach the events) as one
    chunk, as LangGraph's "messages" mode would send it; its tool calls or result."""
    if isinstance(message, AIMessage) and message.id not in events.streamed and text_of(message):
        events.message_chunk(message.id, text_of(message))
    await events.tool_activity(message)


async def _images_for(context: BaseContext, claim: RunClaim) -> list[dict[str, Any]]:
    """The images the input message refers to, as content blocks, when the run's model
    has vision (else none: the prompt lists every attachment by its path)."""
    referred = claim.input.referred
    if not referred:
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
        image_blocks, Path(context.workdir), claim.input.attachments, referred
    )


def _checkpoint_thread(claim: RunClaim) -> str:
    # a subagent keeps its own checkpoint thread; files stay with the conversation
    run = claim.run
    return str(run.run_id if run.is_subagent else run.thread_id)


@dataclass(frozen=True)
class RunTrees:
    """This host's caches of the trees a run works on (None without file trees)."""

    workspace: TreeCache | None = None
    workdir: TreeCache | None = None


@dataclass(frozen=True)
class WorkdirWrites:
    """The run's ``files`` service: a file tool's write reaches the store at once."""

    cache: TreeCache
    uid: UUID
    run_id: UUID

    async def wrote(self, path: str) -> None:
        await self.cache.wrote(path, writer_uid=self.uid, writer_run=self.run_id)
