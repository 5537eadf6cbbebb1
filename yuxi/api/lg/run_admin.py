"""Runs in bulk and their removal: ``runs.cancel_many`` (by thread and run ids, or by
status across the caller's threads) and ``runs.delete`` (an ended run leaves the
LangGraph runs list; its messages and events stay)."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from litestar import delete, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from psycopg import AsyncConnection

from yuxi.api.lg import access
from yuxi.api.lg.errors import Refused
from yuxi.api.lg.views import run_ended, run_status
from yuxi.queue.callers import User
from yuxi.queue.errors import InvalidInput, NotFound
from yuxi.queue.lg import LgRun, lg_run_delete, lg_thread_list, lg_thread_runs
from yuxi.queue.requests import request_cancel
from yuxi.queue.runs import run_request_cancel
from yuxi.queue.statuses import RequestStatus

Conn = NamedDependency[AsyncConnection[Any]]
# cancel_many's status -> the LangGraph run statuses it cancels
_CANCELLED = {"pending": ("pending",), "running": ("running",), "all": ("pending", "running")}


async def cancel(conn: AsyncConnection[Any], user: User, row: LgRun) -> None:
    """Cancels one run as ``runs.cancel`` does: a queued request leaves the queue, a
    dispatched run is cancelled (at once when pending, by its worker when running)."""
    if row.run_id is not None:
        await run_request_cancel(conn, row.run_id, uid=user.uid)
    elif row.request_status == RequestStatus.QUEUED:
        await request_cancel(conn, row.request_id, uid=user.uid)


@post(
    "/runs/cancel",
    status_code=204,
    summary="Cancel runs: a thread's by run id, or the caller's pending or running ones",
    tags=["langgraph"],
)
async def cancel_many(
    conn: Conn,
    user: NamedDependency[User],
    data: JSONBody[dict[str, Any]],
    action: Annotated[str, QueryParameter(description="interrupt")] = "interrupt",
) -> None:
    if action == "rollback":
        raise Refused("cancel with action rollback is not supported: a run's events are durable")
    if action != "interrupt":
        raise InvalidInput("action must be interrupt")
    status, thread_id, run_ids = data.get("status"), data.get("thread_id"), data.get("run_ids")
    if status is not None and (not isinstance(status, str) or status not in _CANCELLED):
        raise InvalidInput("status must be pending, running or all")
    if status is None and (not thread_id or not isinstance(run_ids, list) or not run_ids):
        raise InvalidInput("cancel_many takes thread_id and run_ids, or status")
    if run_ids is not None and not (
        isinstance(run_ids, list) and all(isinstance(r, str) for r in run_ids)
    ):
        raise InvalidInput("run_ids must be a list of run ids")
    try:
        only = None if not thread_id else UUID(str(thread_id))
    except ValueError:
        raise InvalidInput("thread_id must be a UUID") from None
    if only is not None:
        await access.thread(conn, user, only)  # 404 for anyone else's
    chosen: list[LgRun] = []
    if status is None:
        assert only is not None and run_ids is not None
        runs = {r.request_id: r for r in await lg_thread_runs(conn, user.uid, only)}
        missing = [r for r in run_ids if r not in runs]
        if missing:
            raise NotFound(f"run {missing[0]} not found")
        chosen = [runs[r] for r in run_ids]
    else:
        threads = (
            [only]
            if only is not None
            else [t.thread_id for t in await lg_thread_list(conn, user.uid)]
        )
        for t in threads:
            for row in await lg_thread_runs(conn, user.uid, t):
                if run_status(row) in _CANCELLED[status] and (
                    run_ids is None or row.request_id in run_ids
                ):
                    chosen.append(row)
    # queued requests first: cancelling the active run first could dispatch them; an
    # ended run has nothing left to cancel
    chosen.sort(key=lambda r: r.run_id is not None)
    for row in (r for r in chosen if not run_ended(r)):
        await cancel(conn, user, row)


@delete(
    "/threads/{thread_id:uuid}/runs/{run_id:str}",
    summary="Delete an ended run from the thread's runs (its messages and events stay)",
    tags=["langgraph"],
)
async def delete_run(
    conn: Conn, user: NamedDependency[User], thread_id: FromPath[UUID], run_id: FromPath[str]
) -> None:
    row = await access.thread(conn, user, thread_id)
    if row.agent_slug is None:
        raise NotFound(f"run {run_id} not found")
    await lg_run_delete(conn, user.uid, thread_id, run_id)
