"""Scheduled agent jobs of the caller."""

from __future__ import annotations

from uuid import UUID

import msgspec
from litestar import Controller, delete, get, patch, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from yuxi.api.auth import User
from yuxi.api.dto import (
    CreateScheduledJob,
    ScheduledJob,
    UpdateScheduledJob,
)
from yuxi.queue.errors import NotFound
from yuxi.scheduling import jobs
from yuxi.scheduling.jobs import Job, JobSettings, Occurrence


def job_view(job: Job) -> ScheduledJob:
    return ScheduledJob(
        id=job.id,
        project_id=job.project_id,
        agent_slug=job.agent_slug,
        prompt=job.prompt,
        cron=job.cron,
        timezone=job.timezone,
        tool_approval_mode=job.tool_approval_mode,
        enabled=job.enabled,
        next_fire_at=job.next_fire_at,
        last_fired_at=job.last_fired_at,
        created_at=job.created_at,
        updated_at=job.updated_at,
    )


class ScheduledJobsController(Controller):
    path = "/api/scheduled-jobs"
    tags = ("scheduled-jobs",)

    @post("/", summary="Schedule an agent on a 5-field cron in an IANA time zone")
    async def create(
        self, state: State, user: NamedDependency[User], data: JSONBody[CreateScheduledJob]
    ) -> ScheduledJob:
        settings = JobSettings(
            project_id=data.project_id,
            agent_slug=data.agent_slug,
            prompt=data.prompt,
            cron=data.cron,
            timezone=data.timezone,
            tool_approval_mode=data.tool_approval_mode,
            enabled=data.enabled,
        )
        async with state.yuxi.pool.connection() as conn:
            return job_view(await jobs.create_job(conn, user.uid, settings))

    @get("/", summary="The caller's scheduled jobs")
    async def list_all(self, state: State, user: NamedDependency[User]) -> list[ScheduledJob]:
        async with state.yuxi.pool.connection() as conn:
            return [job_view(job) for job in await jobs.list_jobs(conn, user.uid)]

    @get("/{job_id:uuid}", summary="A scheduled job")
    async def get_one(
        self, state: State, user: NamedDependency[User], job_id: FromPath[UUID]
    ) -> ScheduledJob:
        async with state.yuxi.pool.connection() as conn:
            return job_view(await jobs.get_job(conn, user.uid, job_id))

    @patch("/{job_id:uuid}", summary="Change a job (disable with enabled: false)")
    async def update(
        self,
        state: State,
        user: NamedDependency[User],
        job_id: FromPath[UUID],
        data: JSONBody[UpdateScheduledJob],
    ) -> ScheduledJob:
        async with state.yuxi.pool.connection() as conn, conn.transaction():
            current = await jobs.get_job(conn, user.uid, job_id)
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
            return job_view(await jobs.update_job(conn, user.uid, job_id, settings))

    @delete("/{job_id:uuid}", summary="Delete a job; it never fires again")
    async def remove(
        self, state: State, user: NamedDependency[User], job_id: FromPath[UUID]
    ) -> None:
        async with state.yuxi.pool.connection() as conn:
            await jobs.delete_job(conn, user.uid, job_id)

    @post("/{job_id:uuid}/run", status_code=202, summary="Fire the job now")
    async def run(
        self, state: State, user: NamedDependency[User], job_id: FromPath[UUID]
    ) -> Occurrence:
        async with state.yuxi.pool.connection() as conn:
            return await jobs.run_now(conn, user.uid, job_id)

    @get("/{job_id:uuid}/occurrences", summary="The job's occurrences, newest first")
    async def history(
        self, state: State, user: NamedDependency[User], job_id: FromPath[UUID]
    ) -> list[Occurrence]:
        async with state.yuxi.pool.connection() as conn:
            return await jobs.occurrences(conn, user.uid, job_id)
