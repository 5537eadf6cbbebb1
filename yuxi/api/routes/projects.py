"""Projects of the caller."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import msgspec
from litestar import Controller, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.exceptions import ValidationException
from litestar.params import JSONBody
from psycopg import AsyncConnection

from yuxi.api.auth import User
from yuxi.api.bodies import Body
from yuxi.files.layout import projects_directory, user_workspace
from yuxi.files.workspace import client_path
from yuxi.queue.projects import Project as StoredProject
from yuxi.queue.projects import project_create, project_list


class CreateProject(Body):
    name: str
    workdir_path: str | None = None


class Project(msgspec.Struct, frozen=True):
    """``workdir_path`` is relative to the caller's workspace (``projects/<name>``);
    null for a directory an operator put outside it."""

    id: UUID
    name: str
    workdir_path: str | None
    created_at: datetime


def _view(row: StoredProject, workspace: Path) -> Project:
    # clients see the directory relative to their workspace, never the host's layout
    return Project(
        id=row.id,
        name=row.name,
        workdir_path=client_path(workspace, row.workdir_path),
        created_at=row.created_at,
    )


class ProjectsController(Controller):
    path = "/api/projects"
    tags = ("projects",)

    @post("/", summary="Create a project with a working directory in the caller's workspace")
    async def create(
        self,
        state: State,
        conn: NamedDependency[AsyncConnection[Any]],
        user: NamedDependency[User],
        data: JSONBody[CreateProject],
    ) -> Project:
        if "\x00" in (data.workdir_path or "") or "\x00" in data.name:
            raise ValidationException("names and paths cannot contain NUL characters")
        if not data.name.strip() or len(data.name) > 200:
            raise ValidationException("a project name is 1-200 characters")
        if data.workdir_path is not None and not 0 < len(data.workdir_path) <= 200:
            raise ValidationException("workdir_path is 1-200 characters")
        workspace = user_workspace(state.yuxi.settings.home.resolve(), user.uid)
        projects = projects_directory(state.yuxi.settings.home.resolve(), user.uid)
        workdir = (projects / (data.workdir_path or uuid4().hex[:12])).resolve()
        # a project's files stay in its owner's workspace: agents' file tools work there
        if not workdir.is_relative_to(projects.resolve()) or workdir == projects.resolve():
            raise ValidationException(
                "workdir_path is a relative directory name inside your workspace's projects/"
            )
        try:
            await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
        except OSError as error:  # a name the filesystem refuses; never show the host path
            raise ValidationException(
                f"workdir_path cannot be created: {error.strerror or type(error).__name__}"
            ) from None
        return _view(await project_create(conn, user.uid, data.name, str(workdir)), workspace)

    @get("/", summary="The caller's projects")
    async def list_all(
        self,
        state: State,
        conn: NamedDependency[AsyncConnection[Any]],
        user: NamedDependency[User],
    ) -> list[Project]:
        workspace = user_workspace(state.yuxi.settings.home.resolve(), str(user.uid))
        return [_view(row, workspace) for row in await project_list(conn, user.uid)]
