"""Scheduled agent jobs of the caller."""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

import msgspec
from litestar import Controller, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from psycopg import AsyncConnection

from yuxi.api.auth import User
from yuxi.api.bodies import Body
from yuxi.queue.errors import NotFound
from yuxi.scheduling.jobs import (
    Job,
    JobSettings,
    Occurrence,
    job_create,
    job_delete,
    job_fire,
    job_get,
    job_list,
    job_occurrences,
    job_update,
)

Conn = NamedDependency[AsyncConnection[Any]]


class CreateScheduledJob(Body):
    project_id: UUID
    agent_slug: str
    prompt: str
    cron: str
    timezone: str
    tool_approval_mode: Literal["auto", "ask"] = "auto"
    enabled: bool = True


class UpdateScheduledJob(Body):
    """Only the fields present change."""

    project_id: UUID | msgspec.UnsetType = msgspec.UNSET
    agent_slug: str | msgspec.UnsetType = msgspec.UNSET
    prompt: str | msgspec.UnsetType = msgspec.UNSET
    cron: str | msgspec.UnsetType = msgspec.UNSET
    timezone: str | msgspec.UnsetType = msgspec.UNSET
    tool_approval_mode: Literal["auto", "ask"] | msgspec.UnsetType = msgspec.UNSET
    enabled: bool | msgspec.UnsetType = msgspec.UNSET


class ScheduledJobsController(Controller):
    path = "/api/scheduled-jobs"
    tags = ("scheduled-jobs",)

    @post("/", summary="Schedule an agent on a 5-field cron in an IANA time zone")
    async def create(
        self, conn: Conn, user: NamedDependency[User], data: JSONBody[CreateScheduledJob]
    ) -> Job:
        settings = JobSettings(
            project_id=data.project_id,
            agent_slug=data.agent_slug,
            prompt=data.prompt,
            cron=data.cron,
            timezone=data.timezone,
            tool_approval_mode=data.tool_approval_mode,
            enabled=data.enabled,
        )
        return await job_create(conn, user.uid, settings)

    @get("/", summary="The caller's scheduled jobs")
    async def list_all(self, conn: Conn, user: NamedDependency[User]) -> list[Job]:
        return await job_list(conn, user.uid)

    @get("/{job_id:uuid}", summary="A scheduled job")
    async def get_one(self, conn: Conn, user: NamedDependency[User], job_id: FromPath[UUID]) -> Job:
        return await job_get(conn, user.uid, job_id)

    @patch("/{job_id:uuid}", summary="Change a job (disable with enabled: false)")
    async def update(
        self,
        conn: Conn,
        user: NamedDependency[User],
        job_id: FromPath[UUID],
        data: JSONBody[UpdateScheduledJob],
    ) -> Job:
        async with conn.transaction():
            current = await job_get(conn, user.uid, job_id)
            changed = {
                name: value
                for name in UpdateScheduledJob.__struct_fields__
                if (value := getattr(data, name)) is not msgspec.UNSET
            }
            project_id = changed.get("project_id", current.project_id)
            if project_id is None:
                raise NotFound(f"project of scheduled job {job_id} no longer exists")
            settings = JobSettings(
                project_id=project_id,
                agent_slug=changed.get("agent_slug", current.agent_slug),
                prompt=changed.get("prompt", current.prompt),
                cron=changed.get("cron", current.cron),
                timezone=changed.get("timezone", current.timezone),
                tool_approval_mode=changed.get("tool_approval_mode", current.tool_approval_mode),
                enabled=changed.get("enabled", current.enabled),
            )
            return await job_update(conn, user.uid, job_id, settings)

    @delete("/{job_id:uuid}", summary="Delete a job; it never fires again")
    async def remove(self, conn: Conn, user: NamedDependency[User], job_id: FromPath[UUID]) -> None:
        await job_delete(conn, user.uid, job_id)

    @post("/{job_id:uuid}/run", status_code=202, summary="Fire the job now")
    async def run(
        self, conn: Conn, user: NamedDependency[User], job_id: FromPath[UUID]
    ) -> Occurrence:
        return await job_fire(conn, job_id, trigger="manual", uid=user.uid)

    @get("/{job_id:uuid}/occurrences", summary="The job's occurrences, newest first")
    async def history(
        self, conn: Conn, user: NamedDependency[User], job_id: FromPath[UUID]
    ) -> list[Occurrence]:
        return await job_occurrences(conn, user.uid, job_id)
