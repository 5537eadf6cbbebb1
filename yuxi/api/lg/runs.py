"""Runs on a thread: create (background, streamed, waited for), list, get, join, join
the stream, cancel. A run is a request: its run id is the request id, generated here,
so a queued run already has it; its status follows the dispatched run."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import replace
from typing import Annotated, Any
from uuid import UUID, uuid4

from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.exceptions import ValidationException
from litestar.params import FromPath, JSONBody, Parameter, QueryParameter
from litestar.response import Stream
from psycopg import AsyncConnection

from yuxi.api.lg import access, blocks, follow
from yuxi.api.lg import state as lg_state
from yuxi.api.lg.body import RunBody, parse_run, per_run_fields, stream_modes
from yuxi.api.lg.errors import Refused
from yuxi.api.lg.views import LG_RUN_STATUSES, run_status, run_view
from yuxi.api.sse import HEADERS
from yuxi.queue.agents import VisibleAgent
from yuxi.queue.attachments import message_refer_attachments
from yuxi.queue.callers import User
from yuxi.queue.errors import InvalidInput, NotFound, RunNotInterrupted
from yuxi.queue.lg import (
    LgRun,
    lg_run_record,
    lg_run_submit,
    lg_thread_bind,
    lg_thread_create,
    lg_thread_delete,
    lg_thread_runs,
    lg_thread_set_temporary,
)
from yuxi.queue.requests import request_cancel
from yuxi.queue.runs import run_request_cancel, run_resume
from yuxi.queue.statuses import RequestStatus, RunStatus
from yuxi.queue.threads import thread_queue

Conn = NamedDependency[AsyncConnection[Any]]
Req = Request[object, object, State]
MAX_SEQ = 2**63 - 1


def _location(row: LgRun) -> str:
    """The run's path relative to the API's base (``/lg``), as LangGraph's server sends
    it: the SDKs append it to a base URL that already ends in the prefix."""
    return f"/threads/{row.thread_id}/runs/{row.request_id}"


async def start_run(
    state: State, conn: AsyncConnection[Any], user: User, thread_id: UUID, data: dict[str, Any]
) -> tuple[LgRun, RunBody]:
    """Binds the thread to the assistant and submits (or resumes) in one transaction."""
    body = parse_run(data)
    agent = await access.assistant(conn, user, body.assistant_id)
    keys = [item["key"] for item in access.configurable_items(agent)]
    fields, passed = per_run_fields(body.extra, keys, body.open_keys)
    if body.state is not None:
        body = replace(body, query=state_query(agent, body.state))
    if body.checkpoint_id is not None:
        head = await lg_state.head_id(await state.yuxi.checkpointer(), str(thread_id))
        if body.checkpoint_id != head:
            raise Refused(
                "running from an earlier checkpoint is not supported (no forking); send the"
                " thread's latest checkpoint or none"
            )
    request_id = str(uuid4())
    files = blocks.held_files(body.blocks, state.yuxi.settings)  # 400 before anything runs
    async with conn.transaction():
        if body.if_not_exists == "create":
            await lg_thread_create(
                conn,
                user.uid,
                thread_id=thread_id,
                metadata={},
                agent_slug=None,
                if_exists="do_nothing",
            )
        await lg_thread_bind(conn, user.uid, thread_id, agent.slug)
        queue = await thread_queue(conn, thread_id)
        interrupted = queue is not None and queue.status == "interrupted"
        if body.has_resume:
            if queue is None or queue.last_run_id is None or not interrupted:
                raise RunNotInterrupted(f"thread {thread_id} has no interrupted run to resume")
            info = await run_resume(
                conn, queue.last_run_id, resume=body.resume, uid=user.uid, request_id=request_id
            )
            await lg_run_record(
                conn,
                request_id,
                metadata=body.metadata,
                strategy="enqueue",
                stream_modes=body.stream_modes,
            )
        else:
            assert body.query is not None
            if interrupted and queue is not None and queue.last_run_id is not None:
                # as on LangGraph's server, new input supersedes a pending interrupt:
                # the interrupted run is cancelled and the message runs in its place
                await run_request_cancel(conn, queue.last_run_id, uid=user.uid)
            async with blocks.attached(
                conn, user.uid, thread_id, files, state.yuxi.settings
            ) as added:
                info = await lg_run_submit(
                    conn,
                    user.uid,
                    thread_id,
                    query=body.query,
                    request_id=request_id,
                    strategy=body.strategy,
                    model_spec=fields.get("model_spec"),
                    tool_approval_mode=fields.get("tool_approval_mode"),
                    metadata=body.metadata,
                    stream_modes=body.stream_modes,
                    configurable=passed,
                )
                if added and info.message_id is not None:
                    ids = [row.id for row in added]
                    await message_refer_attachments(conn, user.uid, info.message_id, ids)
    strategy = "enqueue" if body.has_resume else body.strategy
    # the run as it stands at its creation: a request just queued, or a run just pending
    row = LgRun(
        request_id=request_id,
        thread_id=thread_id,
        agent_slug=agent.slug,
        request_status=info.status,
        run_id=info.run_id,
        run_status=None if info.run_id is None else RunStatus.PENDING,
        error_type=None,
        error_message=None,
        created_at=info.created_at,
        updated_at=info.created_at,
        metadata=body.metadata,
        multitask_strategy=strategy,
        stream_modes=body.stream_modes,
    )
    return row, body


def state_query(agent: VisibleAgent, state: dict[str, Any]) -> str:
    """An input without messages, for a project's graph that takes other keys: its JSON
    (the worker gives it to the graph as its input, yuxi.runtime.graph_io); a yuxi
    agent's state is its messages."""
    from yuxi.agents.graphs import graph_backend

    if graph_backend(agent.backend_id) is None:
        raise Refused(
            f"input keys {sorted(state)} are not supported: a yuxi agent's state is its"
            " messages (send settings as config.configurable or context)"
        )
    return json.dumps(state, sort_keys=True)


async def final_values(state: State, row: LgRun) -> dict[str, Any]:
    """What join and wait answer: the thread's values after the run, with its
    interrupt; a failed run's error as ``__error__``."""
    checkpointer = await state.yuxi.checkpointer()
    saved = None
    if row.run_id is not None:  # as this run left the thread (a later run may have begun)
        saved = await lg_state.run_head(checkpointer, str(row.thread_id), str(row.run_id))
    if saved is None:
        saved = await lg_state.head(checkpointer, str(row.thread_id))
    values = lg_state.values_of(saved)
    if row.run_status == RunStatus.INTERRUPTED:
        interrupts = lg_state.interrupts_of(saved)
        if interrupts:
            values["__interrupt__"] = interrupts
    if row.run_status == RunStatus.FAILED:
        values["__error__"] = {"error": row.error_type or "Error", "message": row.error_message}
    return values


def _stream(row: LgRun, content: Any) -> Stream:
    """A run's stream; ``Location`` is where the SDKs reconnect after a drop (every
    run's events are durable, so every stream can be resumed)."""
    location = _location(row)
    headers = dict(HEADERS) | {"Content-Location": location, "Location": location + "/stream"}
    return Stream(content=content, media_type="text/event-stream", headers=headers)


@post(
    "/threads/{thread_id:uuid}/runs",
    status_code=200,
    summary="Create a background run",
    tags=["langgraph"],
)
async def create_run(
    state: State,
    conn: Conn,
    user: NamedDependency[User],
    request: Req,
    thread_id: FromPath[UUID],
    data: JSONBody[dict[str, Any]],
) -> Response[dict[str, Any]]:
    row, _body = await start_run(state, conn, user, thread_id, data)
    return Response(run_view(row), headers={"Content-Location": _location(row)})


@post(
    "/threads/{thread_id:uuid}/runs/stream",
    status_code=200,
    summary="Create a run and stream it",
    tags=["langgraph"],
)
async def stream_new_run(
    state: State,
    conn: Conn,
    user: NamedDependency[User],
    request: Req,
    thread_id: FromPath[UUID],
    data: JSONBody[dict[str, Any]],
) -> Stream:
    row, body = await start_run(state, conn, user, thread_id, data)
    content = follow.stream_run(
        state.yuxi,
        user.uid,
        thread_id,
        row.request_id,
        body.stream_modes,
        0,
        row,
        subgraphs=body.subgraphs,
    )
    return _stream(row, content)


@post(
    "/threads/{thread_id:uuid}/runs/wait",
    status_code=200,
    summary="Create a run and wait for its end; answers the thread's values",
    tags=["langgraph"],
)
async def wait_new_run(
    state: State,
    user: NamedDependency[User],
    thread_id: FromPath[UUID],
    data: JSONBody[dict[str, Any]],
) -> Stream:
    # no connection is held while waiting: a wait may last as long as its run
    async with state.yuxi.pool.connection() as conn:
        row, _body = await start_run(state, conn, user, thread_id, data)
    return _waited(state, user, row)


def _waited(
    state: State,
    user: User,
    row: LgRun,
    *,
    then: Callable[[State, User, LgRun], Awaitable[None]] | None = None,
) -> Stream:
    """The thread's values once the run ended, as LangGraph's server sends them: the
    headers at once, a newline every heartbeat while the run goes on (JSON ignores
    leading whitespace; a proxy's idle timeout does not cut the wait), then the
    values. No connection is held while waiting."""

    async def body() -> AsyncIterator[bytes]:
        last = row
        rows = follow.wait_for(
            state.yuxi, user.uid, row.thread_id, row.request_id, dispatched=False, first=row
        )
        async for seen in rows:
            if seen is None:
                yield b"\n"
            else:
                last = seen
        values = await final_values(state, last)
        if then is not None:
            await then(state, user, row)
        yield json.dumps(values, default=str).encode()

    return Stream(
        content=body(),
        media_type="application/json",
        headers={"Content-Location": _location(row)},
    )


@get("/threads/{thread_id:uuid}/runs", summary="A thread's runs, newest first", tags=["langgraph"])
async def list_runs(
    conn: Conn,
    user: NamedDependency[User],
    thread_id: FromPath[UUID],
    limit: Annotated[int, Parameter(ge=0, le=1000)] = 10,
    offset: Annotated[int, Parameter(ge=0)] = 0,
    status: Annotated[str | None, QueryParameter(description="a run status")] = None,
) -> list[dict[str, Any]]:
    if status is not None and status not in LG_RUN_STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(LG_RUN_STATUSES)}")
    rows = await _runs(conn, user, thread_id)  # 404 for others' threads
    if status is not None:
        rows = [r for r in rows if run_status(r) == status]
    return [run_view(r) for r in rows[offset : offset + limit]]


async def _runs(conn: AsyncConnection[Any], user: User, thread_id: UUID) -> list[LgRun]:
    row = await access.thread(conn, user, thread_id)
    if row.agent_slug is None:
        return []
    return await lg_thread_runs(conn, user.uid, thread_id)


async def _run(conn: AsyncConnection[Any], user: User, thread_id: UUID, run_id: str) -> LgRun:
    """The caller's run (its thread's owner is checked by the query): 404 otherwise."""
    rows = await lg_thread_runs(conn, user.uid, thread_id, run_id)
    if not rows:
        raise NotFound(f"run {run_id} not found")
    return rows[0]


@get("/threads/{thread_id:uuid}/runs/{run_id:str}", summary="A run", tags=["langgraph"])
async def get_run(
    conn: Conn, user: NamedDependency[User], thread_id: FromPath[UUID], run_id: FromPath[str]
) -> dict[str, Any]:
    return run_view(await _run(conn, user, thread_id, run_id))


@get(
    "/threads/{thread_id:uuid}/runs/{run_id:str}/join",
    summary="Wait for a run's end; answers the thread's values",
    tags=["langgraph"],
)
async def join_run(
    state: State,
    user: NamedDependency[User],
    thread_id: FromPath[UUID],
    run_id: FromPath[str],
) -> Stream:
    async with state.yuxi.pool.connection() as conn:  # none is held while waiting
        row = await _run(conn, user, thread_id, run_id)
    return _waited(state, user, row)


@get(
    "/threads/{thread_id:uuid}/runs/{run_id:str}/stream",
    summary="Join a run's stream: from the start, or after Last-Event-ID",
    tags=["langgraph"],
)
async def join_stream(
    state: State,
    conn: Conn,
    user: NamedDependency[User],
    request: Req,
    thread_id: FromPath[UUID],
    run_id: FromPath[str],
    stream_mode: Annotated[list[str] | None, QueryParameter(description="stream modes")] = None,
    cancel_on_disconnect: Annotated[bool, QueryParameter(description="refused")] = False,
) -> Stream:
    if cancel_on_disconnect:
        raise Refused("cancel_on_disconnect is not supported: cancel the run explicitly")
    row = await _run(conn, user, thread_id, run_id)
    after = 0
    last_event_id = request.headers.get("last-event-id")
    if last_event_id:
        try:
            after = int(last_event_id)
        except ValueError:
            after = -1
        if not 0 <= after <= MAX_SEQ:
            raise ValidationException("Last-Event-ID must be an event id of this stream")
    # the SDK sends an empty stream_mode for none: the modes the run was created with
    chosen = [m for m in stream_mode or [] if m] or None
    modes = stream_modes(chosen, default=row.stream_modes or ["values"])
    content = follow.stream_run(state.yuxi, user.uid, thread_id, run_id, modes, after, row)
    return _stream(row, content)


@post(
    "/threads/{thread_id:uuid}/runs/{run_id:str}/cancel",
    status_code=202,
    summary="Cancel a run (queued: it leaves the queue; running: its worker stops it)",
    tags=["langgraph"],
)
async def cancel_run(
    state: State,
    user: NamedDependency[User],
    request: Req,
    thread_id: FromPath[UUID],
    run_id: FromPath[str],
    wait: Annotated[bool, QueryParameter(description="answer once it ended")] = False,
    action: Annotated[str, QueryParameter(description="interrupt")] = "interrupt",
) -> dict[str, Any]:
    if action == "rollback":
        raise Refused("cancel with action rollback is not supported: a run's events are durable")
    if action != "interrupt":
        raise InvalidInput("action must be interrupt")
    async with state.yuxi.pool.connection() as conn:  # none is held while waiting
        row = await _run(conn, user, thread_id, run_id)
        if row.run_id is not None:
            await run_request_cancel(conn, row.run_id, uid=user.uid)
        elif row.request_status == RequestStatus.QUEUED:
            await request_cancel(conn, run_id, uid=user.uid)
        if not wait:
            return run_view(await _run(conn, user, thread_id, run_id))
    return run_view(
        await follow.wait_ended(state.yuxi, user.uid, thread_id, run_id, client=request)
    )


async def _stateless(state: State, user: User, data: dict[str, Any]) -> tuple[LgRun, RunBody, bool]:
    """A run without a thread: on a new thread of its own, bound to the assistant;
    with ``on_completion`` "delete" (the default) the thread is deleted once the run
    ended (here at the end of a stream or a wait, else by the workers' maintenance)."""
    on_completion = data.get("on_completion") or "delete"
    if on_completion not in ("delete", "keep"):
        raise InvalidInput("on_completion must be delete or keep")
    body = parse_run(data)  # 400 and 422 before a thread exists
    thread_id = uuid4()
    async with state.yuxi.pool.connection() as conn:
        async with conn.transaction():
            await lg_thread_create(
                conn,
                user.uid,
                thread_id=thread_id,
                metadata={},
                agent_slug=body.assistant_id,
                if_exists="raise",
            )
            if on_completion == "delete":
                await lg_thread_set_temporary(conn, user.uid, thread_id)
        try:
            row, body = await start_run(state, conn, user, thread_id, data)
        except BaseException:
            if on_completion == "delete":
                await lg_thread_delete(conn, user.uid, thread_id)
            raise
    return row, body, on_completion == "delete"


async def _removed(state: State, user: User, row: LgRun) -> None:
    async with state.yuxi.pool.connection() as conn:
        await lg_thread_delete(conn, user.uid, row.thread_id)


@post("/runs", status_code=200, summary="Create a stateless background run", tags=["langgraph"])
async def stateless_run(
    state: State, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> Response[dict[str, Any]]:
    row, _body, _temporary = await _stateless(state, user, data)
    return Response(run_view(row), headers={"Content-Location": _location(row)})


@post(
    "/runs/stream",
    status_code=200,
    summary="Create a stateless run and stream it",
    tags=["langgraph"],
)
async def stateless_stream(
    state: State, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> Stream:
    row, body, temporary = await _stateless(state, user, data)
    parts = follow.stream_run(
        state.yuxi,
        user.uid,
        row.thread_id,
        row.request_id,
        body.stream_modes,
        0,
        row,
        subgraphs=body.subgraphs,
    )

    async def content() -> AsyncIterator[bytes]:
        async with aclosing(parts):
            async for part in parts:
                yield part
        if temporary:  # streamed to its end (a client gone leaves it to maintenance)
            await _removed(state, user, row)

    return _stream(row, content())


@post(
    "/runs/wait",
    status_code=200,
    summary="Create a stateless run and wait for its end; answers its values",
    tags=["langgraph"],
)
async def stateless_wait(
    state: State, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> Stream:
    row, _body, temporary = await _stateless(state, user, data)
    return _waited(state, user, row, then=_removed if temporary else None)
