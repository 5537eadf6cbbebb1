"""Crons: yuxi's scheduled jobs. A cron fires through yuxi's scheduler, each time on a
new thread (a LangGraph cron without a thread); jobs live in a per-user project named
``langgraph`` (created on first use, ``projects/langgraph`` in the workspace: a workdir
tree of the file store, nothing on the API's host)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from litestar import delete, patch, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from psycopg import AsyncConnection

from yuxi.api.lg import access
from yuxi.api.lg.assistants import _page
from yuxi.api.lg.body import RunBody, parse_run, per_run_fields
from yuxi.api.lg.errors import Refused
from yuxi.files.layout import projects_directory
from yuxi.queue.agents import VisibleAgent
from yuxi.queue.callers import User
from yuxi.queue.errors import InvalidInput
from yuxi.queue.projects import project_create, project_list
from yuxi.scheduling.jobs import (
    Job,
    JobSettings,
    job_create,
    job_delete,
    job_get,
    job_list,
    job_update,
)

Conn = NamedDependency[AsyncConnection[Any]]
PROJECT = "langgraph"


def cron_view(job: Job) -> dict[str, Any]:
    return {
        "cron_id": str(job.id),
        "assistant_id": job.agent_slug,
        "thread_id": None,
        "schedule": job.cron,
        "timezone": job.timezone,
        "enabled": job.enabled,
        "end_time": None,
        "next_run_date": job.next_fire_at,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
        "payload": {
            "input": {"messages": [{"role": "user", "content": job.prompt}]},
            "context": {"tool_approval_mode": job.tool_approval_mode},
        },
        "metadata": {},
        "user_id": None,
    }


async def default_project(state: State, conn: AsyncConnection[Any], user: User) -> UUID:
    for project in await project_list(conn, user.uid):
        if project.name == PROJECT:
            return project.id
    workdir = projects_directory(state.yuxi.settings.home.resolve(), user.uid) / PROJECT
    return (await project_create(conn, user.uid, PROJECT, str(workdir))).id


@post(
    "/runs/crons",
    status_code=200,
    summary="Schedule an assistant (a yuxi scheduled job)",
    tags=["langgraph"],
)
async def create_cron(
    state: State, conn: Conn, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> dict[str, Any]:
    schedule = data.get("schedule")
    if not isinstance(schedule, str) or not schedule.strip():
        raise InvalidInput("schedule (a 5-field cron expression) is required")
    if data.get("end_time"):
        raise Refused("end_time is not supported: delete the cron to stop it")
    if data.get("command") is not None:
        raise Refused("a cron runs input.messages; command is not supported")
    body = parse_run(
        {k: v for k, v in data.items() if k not in ("schedule", "timezone", "enabled")}
    )
    agent = await access.assistant(conn, user, body.assistant_id)
    fields = _cron_fields(body, agent)
    timezone = data.get("timezone") or "UTC"
    enabled = data.get("enabled", True)
    if not isinstance(timezone, str) or not isinstance(enabled, bool):
        raise InvalidInput("timezone must be a string and enabled a boolean")
    assert body.query is not None
    settings = JobSettings(
        project_id=await default_project(state, conn, user),
        agent_slug=agent.slug,
        prompt=body.query,
        cron=schedule,
        timezone=timezone,
        tool_approval_mode=fields.get("tool_approval_mode") or "auto",
        enabled=enabled,
    )
    return cron_view(await job_create(conn, user.uid, settings))


@patch(
    "/runs/crons/{cron_id:uuid}",
    summary="Change a cron (its schedule, input, timezone, enabled, approval mode)",
    tags=["langgraph"],
)
async def update_cron(
    state: State,
    conn: Conn,
    user: NamedDependency[User],
    cron_id: FromPath[UUID],
    data: JSONBody[dict[str, Any]],
) -> dict[str, Any]:
    job = await job_get(conn, user.uid, cron_id)  # 404 for anyone else's
    if data.get("end_time"):
        raise Refused("end_time is not supported: delete the cron to stop it")
    if data.get("command") is not None:
        raise Refused("a cron runs input.messages; command is not supported")
    schedule = data.get("schedule", job.cron)
    if not isinstance(schedule, str) or not schedule.strip():
        raise InvalidInput("schedule must be a 5-field cron expression")
    timezone = data.get("timezone") or job.timezone
    enabled = data.get("enabled", job.enabled)
    if not isinstance(timezone, str) or not isinstance(enabled, bool):
        raise InvalidInput("timezone must be a string and enabled a boolean")
    # the run part of the body is checked as create checks it; what it leaves out is kept
    run = {
        k: v for k, v in data.items() if k not in ("schedule", "timezone", "enabled", "end_time")
    }
    run["assistant_id"] = job.agent_slug
    run.setdefault("input", {"messages": [{"role": "user", "content": job.prompt}]})
    body = parse_run(run)
    agent = await access.assistant(conn, user, job.agent_slug)
    fields = _cron_fields(body, agent)
    assert body.query is not None
    settings = JobSettings(
        project_id=job.project_id or await default_project(state, conn, user),
        agent_slug=job.agent_slug,
        prompt=body.query,
        cron=schedule,
        timezone=timezone,
        tool_approval_mode=fields.get("tool_approval_mode") or job.tool_approval_mode,
        enabled=enabled,
    )
    return cron_view(await job_update(conn, user.uid, cron_id, settings))


@post("/runs/crons/count", status_code=200, summary="Count the caller's crons", tags=["langgraph"])
async def count_crons(
    conn: Conn, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> int:
    if data.get("thread_id"):
        return 0
    assistant_id = data.get("assistant_id")
    return sum(
        1
        for job in await job_list(conn, user.uid)
        if assistant_id is None or job.agent_slug == assistant_id
    )


@post(
    "/threads/{thread_id:uuid}/runs/crons",
    status_code=422,
    summary="Refused: crons on a thread",
    tags=["langgraph"],
)
async def create_thread_cron(
    user: NamedDependency[User], thread_id: FromPath[UUID], data: JSONBody[dict[str, Any]]
) -> None:
    raise Refused(
        "crons on a thread are not supported: a yuxi scheduled job starts a new thread"
        " each time; create the cron without a thread"
    )


@post(
    "/runs/crons/search", status_code=200, summary="Search the caller's crons", tags=["langgraph"]
)
async def search_crons(
    conn: Conn, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> list[dict[str, Any]]:
    limit, offset = _page(data)
    if data.get("thread_id"):
        return []
    assistant_id = data.get("assistant_id")
    jobs = [
        job
        for job in await job_list(conn, user.uid)
        if assistant_id is None or job.agent_slug == assistant_id
    ]
    return [cron_view(job) for job in jobs[offset : offset + limit]]


@delete(
    "/runs/crons/{cron_id:uuid}", summary="Delete a cron; it never fires again", tags=["langgraph"]
)
async def delete_cron(conn: Conn, user: NamedDependency[User], cron_id: FromPath[UUID]) -> None:
    await job_delete(conn, user.uid, cron_id)


def _cron_fields(body: RunBody, agent: VisibleAgent) -> dict[str, Any]:
    """The per-run fields a cron keeps (its approval mode): its own model and a
    client's own config.configurable keys are refused."""
    if body.state is not None:
        raise Refused("a cron runs input.messages; other input keys are not supported")
    keys = [item["key"] for item in access.configurable_items(agent)]
    fields, passed = per_run_fields(body.extra, keys, body.open_keys)
    if passed:
        raise Refused(
            f"a cron keeps no config.configurable keys of its own ({', '.join(sorted(passed))})"
        )
    if fields.get("model_spec"):
        raise Refused("a cron runs the agent's own model; model cannot be set per cron")
    return fields
