"""The caller's workspace prompt files: ``agents/AGENTS.md``, ``agents/USER.md`` and
``agents/MEMORY.md``, read and replaced as raw UTF-8 text. No other path is reachable:
the name must be one of the three, and the workspace is always the caller's."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from litestar import Controller, Request, Response, get, put
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath

from yuxi.api.auth import User
from yuxi.api.errors import error_response
from yuxi.api.limits import RAW_BODY
from yuxi.files.layout import user_workspace
from yuxi.files.workspace import (
    PROMPT_LIMIT,
    WORKSPACE_FILES,
    SavedWorkspaceFile,
    WorkspaceFileRefused,
    ensure_agents_template,
    read_workspace_bytes,
    write_workspace_file,
)
from yuxi.queue.errors import InvalidInput, NotFound

# litestar adds "; charset=utf-8" to a text type
MARKDOWN = "text/markdown"


def _file_name(name: str) -> str:
    # a path parameter comes with its leading slash
    found = name.removeprefix("/")
    if found not in WORKSPACE_FILES:
        raise NotFound(f"no workspace file {found!r} (there are: {', '.join(WORKSPACE_FILES)})")
    return found


def _workspace(state: State, user: User) -> Path:
    return user_workspace(state.yuxi.settings.home.resolve(), str(user.uid))


class _TooLarge(Exception):
    pass


async def _read_body(request: Request[Any, Any, Any]) -> bytes:
    """The body, refused once it is over ``PROMPT_LIMIT`` (read no further)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > PROMPT_LIMIT:
        raise _TooLarge
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > PROMPT_LIMIT:
            raise _TooLarge
    return bytes(body)


def _text(body: bytes) -> bytes:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidInput(f"the body is not valid UTF-8 (byte {error.start})") from None
    if b"\x00" in body:
        raise InvalidInput("the body contains a NUL character")
    return body


class WorkspaceController(Controller):
    path = "/api/workspace/files"
    tags = ("workspace",)

    @get(
        "/{name:path}",
        summary="A workspace prompt file as raw text (agents/AGENTS.md, USER.md or MEMORY.md)",
        media_type=MARKDOWN,
    )
    async def read(
        self, state: State, user: NamedDependency[User], name: FromPath[str]
    ) -> Response[bytes]:
        file_name = _file_name(name)
        workspace = _workspace(state, user)
        data = await asyncio.to_thread(_first_use_read, workspace, file_name)
        if data is None:
            raise NotFound(f"{file_name} does not exist")
        return Response(data, media_type=MARKDOWN)

    @put(
        "/{name:path}",
        summary="Replace a workspace prompt file with the raw UTF-8 body (at most 64 KiB)",
        opt={RAW_BODY: True},
    )
    async def write(
        self,
        state: State,
        request: Request[Any, Any, Any],
        user: NamedDependency[User],
        name: FromPath[str],
    ) -> Response[Any] | SavedWorkspaceFile:
        file_name = _file_name(name)
        try:
            body = _text(await _read_body(request))
        except _TooLarge:
            return error_response(
                413,
                "payload_too_large",
                f"a workspace file is at most {PROMPT_LIMIT} bytes (64 KiB)",
            )
        workspace = _workspace(state, user)
        try:
            return await asyncio.to_thread(_first_use_write, workspace, file_name, body)
        except WorkspaceFileRefused as refused:  # a symlink or a non-regular file
            raise InvalidInput(str(refused)) from None


def _first_use_read(workspace: Path, name: str) -> bytes | None:
    ensure_agents_template(workspace)
    return read_workspace_bytes(workspace, name)


def _first_use_write(workspace: Path, name: str, body: bytes) -> SavedWorkspaceFile:
    ensure_agents_template(workspace)
    return write_workspace_file(workspace, name, body)
