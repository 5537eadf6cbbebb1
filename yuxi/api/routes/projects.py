"""Projects of the caller. A project names a directory of the caller's workspace,
``projects/<workdir_path>``; its conversations' files are the workdir tree at that root
in the file store (``yuxi.thread_file_tree``), so nothing is made on the API's host."""

from __future__ import annotations

import posixpath
import unicodedata
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
from yuxi.files.workdir import MAX_NAME_BYTES
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


def project_directory(raw: str) -> str:
    """``raw`` as a directory under the workspace's ``projects/``: normalised, and a path
    the file store takes for a tree's root (ValidationException otherwise)."""
    directory = posixpath.normpath(raw)
    # a project's files stay in its owner's workspace: agents' file tools work there
    if directory.startswith(("/", "../")) or directory in (".", ".."):
        raise ValidationException(
            "workdir_path is a relative directory name inside your workspace's projects/"
        )
    for part in directory.split("/"):
        if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise ValidationException(
                f"workdir_path cannot be created: a name is at most {MAX_NAME_BYTES} bytes"
            )
        if "\\" in part or any(unicodedata.category(c) == "Cc" for c in part):
            raise ValidationException(
                "workdir_path cannot be created: no backslash or control character in a name"
            )
    return directory


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
        home = state.yuxi.settings.home.resolve()
        workspace = user_workspace(home, user.uid)
        directory = project_directory(data.workdir_path or uuid4().hex[:12])
        # the column keeps the path as it always has: <workspace>/projects/<directory>
        workdir = projects_directory(home, user.uid) / directory
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
