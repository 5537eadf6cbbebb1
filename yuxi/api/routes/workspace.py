"""The caller's workspace prompt files: ``agents/AGENTS.md``, ``agents/USER.md`` and
``agents/MEMORY.md``, read and replaced as raw UTF-8 text. No other path is reachable:
the name must be one of the three, and the workspace is always the caller's. The files
are the caller's workspace tree in the file store, at the same paths: the API reads and
writes no disk for them."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from litestar import Controller, Request, Response, get, put
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath
from litestar.response import Stream

from yuxi.api.auth import User
from yuxi.api.dependencies import caller_briefly
from yuxi.api.errors import error_response
from yuxi.files.store import FileStore
from yuxi.files.workspace import (
    AGENTS_DIR,
    AGENTS_TEMPLATE,
    PROMPT_LIMIT,
    WORKSPACE_FILES,
    SavedWorkspaceFile,
)
from yuxi.queue.errors import FileChanged, InvalidInput, NotFound

# litestar adds "; charset=utf-8" to a text type
MARKDOWN = "text/markdown"
AGENTS_FILE = f"{AGENTS_DIR}/AGENTS.md"
# the file store takes a pooled connection for each statement: the caller is checked on
# one of its own, held by none of them meanwhile
BRIEFLY = {"user": Provide(caller_briefly)}


def _file_name(name: str) -> str:
    # a path parameter comes with its leading slash
    found = name.removeprefix("/")
    if found not in WORKSPACE_FILES:
        raise NotFound(f"no workspace file {found!r} (there are: {', '.join(WORKSPACE_FILES)})")
    return found


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


async def ensure_agents_template(files: FileStore, tree: UUID) -> bool:
    """Gives a workspace tree with nothing under ``agents/`` (and no file ``agents``)
    the ``AGENTS_TEMPLATE`` as ``agents/AGENTS.md``; True when it did. Written only where
    no file is, so a user's own AGENTS.md written meanwhile is never replaced."""
    if await files.list(tree, AGENTS_DIR) or await files.get(tree, AGENTS_DIR) is not None:
        return False
    try:
        await files.write(
            tree, AGENTS_FILE, AGENTS_TEMPLATE.encode(), media_type=MARKDOWN, replaces=""
        )
    except FileChanged:  # another request, or the user, was first
        return False
    return True


class WorkspaceController(Controller):
    path = "/api/workspace/files"
    tags = ("workspace",)

    @get(
        "/{name:path}",
        summary="A workspace prompt file as raw text (agents/AGENTS.md, USER.md or MEMORY.md)",
        media_type=MARKDOWN,
        dependencies=BRIEFLY,
    )
    async def read(self, state: State, user: NamedDependency[User], name: FromPath[str]) -> Stream:
        file_name = _file_name(name)
        files: FileStore = state.yuxi.files
        tree = await files.workspace_tree(user.uid)
        await ensure_agents_template(files, tree)
        info = await files.get(tree, file_name)
        if info is None:
            raise NotFound(f"{file_name} does not exist")
        return Stream(
            files.stream(info), media_type=MARKDOWN, headers={"Content-Length": str(info.bytes)}
        )

    @put(
        "/{name:path}",
        summary="Replace a workspace prompt file with the raw UTF-8 body (at most 64 KiB)",
        dependencies=BRIEFLY,
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
        files: FileStore = state.yuxi.files
        tree = await files.workspace_tree(user.uid)
        # what a disk could not hold either: a file named agents, a directory at the name
        if await files.get(tree, AGENTS_DIR) is not None:
            raise InvalidInput(f"{AGENTS_DIR}/ is not a directory; it is never replaced")
        if await files.list(tree, file_name):
            raise InvalidInput(f"{file_name} is not a regular file")
        if file_name != AGENTS_FILE:
            await ensure_agents_template(files, tree)
        info = await files.write(tree, file_name, body, media_type=MARKDOWN, writer_uid=user.uid)
        return SavedWorkspaceFile(file_name, info.bytes, info.sha256, info.modified_at)
