"""A conversation's files: attachments (uploads/), the workdir viewer, artifacts (outputs/).

Everything is read from the persisted workdir, never from an agent's runtime. Paths in
and out are relative to the workdir; one that is absolute, names ``..``, holds a NUL or
leads outside through a symlink is a 400 (``invalid_input``).
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote
from uuid import UUID

import msgspec
from litestar import Controller, Request, delete, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, Parameter
from litestar.response import Stream
from psycopg import AsyncConnection

from yuxi.api.auth import User
from yuxi.api.uploads import read_files
from yuxi.files.attachments import commit_attachments, remove_attachment, uploads_dir
from yuxi.files.layout import conversation_workdir
from yuxi.files.workdir import (
    OUTPUTS,
    BadPath,
    Entry,
    confined,
    list_directory,
    media_type,
    shown,
    walk_files,
)
from yuxi.queue.attachments import Attachment, attachment_list
from yuxi.queue.errors import InvalidInput, NotFound
from yuxi.queue.threads import thread_workdir

Conn = NamedDependency[AsyncConnection[Any]]
CHUNK = 256 * 1024
# what a browser may do with a file it is shown inline: nothing active
SANDBOX = (
    "sandbox; default-src 'none'; img-src 'self' data:; media-src 'self'; style-src 'unsafe-inline'"
)


class AttachmentView(msgspec.Struct, frozen=True):
    """An attachment; ``path`` is relative to the conversation's workdir. ``created`` is
    false in an upload's answer when the same name and content were already attached."""

    id: UUID
    thread_id: UUID
    filename: str
    path: str
    bytes: int
    sha256: str
    media_type: str
    created_at: datetime
    created: bool = True


class FileEntry(msgspec.Struct, frozen=True):
    """A workdir entry; ``kind`` is file, directory or symlink (one leading outside the
    workdir, never followed); ``path`` is relative to the workdir."""

    name: str
    path: str
    kind: str
    bytes: int | None
    modified: datetime | None
    media_type: str | None


class FileListing(msgspec.Struct, frozen=True):
    path: str
    entries: list[FileEntry]
    truncated: bool


class ArtifactListing(msgspec.Struct, frozen=True):
    artifacts: list[FileEntry]
    truncated: bool


async def conversation_root(
    state: State, conn: AsyncConnection[Any], uid: UUID, thread_id: UUID
) -> Path:
    """The thread's workdir on this host (NotFound for a thread the user cannot see)."""
    project = await thread_workdir(conn, uid, thread_id)
    return conversation_workdir(state.yuxi.settings.home, uid, thread_id, project)


def entry_view(entry: Entry) -> FileEntry:
    return FileEntry(
        entry.name, entry.path, entry.kind, entry.bytes, entry.modified, entry.media_type
    )


def attachment_view(thread_id: UUID, row: Attachment, *, created: bool = True) -> AttachmentView:
    return AttachmentView(
        id=row.id,
        thread_id=thread_id,
        filename=row.filename,
        path=row.path,
        bytes=row.bytes,
        sha256=row.sha256,
        media_type=row.media_type,
        created_at=row.created_at,
        created=created,
    )


class FilesController(Controller):
    path = "/api/chat/thread/{thread_id:uuid}"
    tags = ("files",)

    @post(
        "/attachments",
        status_code=201,
        summary="Attach files (multipart/form-data, one part named file per file)",
        request_max_body_size=None,  # checked as the body streams in (uploads.py)
    )
    async def attach(
        self,
        request: Request[Any, Any, Any],
        state: State,
        user: NamedDependency[User],
        thread_id: FromPath[UUID],
    ) -> list[AttachmentView]:
        settings = state.yuxi.settings
        pool = state.yuxi.pool
        async with pool.connection() as conn:
            root = await conversation_root(state, conn, user.uid, thread_id)
        uploads = await asyncio.to_thread(uploads_dir, root)  # BadPath: a link out
        staged = await read_files(
            request,
            uploads,
            file_limit=settings.attachment_max_bytes,
            request_limit=settings.thread_attachments_max_bytes + 1024 * 1024,
        )
        rows = await commit_attachments(
            pool, user.uid, thread_id, staged, thread_limit=settings.thread_attachments_max_bytes
        )
        return [attachment_view(thread_id, row, created=row.created) for row in rows]

    @get("/attachments", summary="The conversation's attachments, oldest first")
    async def attachments(
        self, conn: Conn, user: NamedDependency[User], thread_id: FromPath[UUID]
    ) -> list[AttachmentView]:
        return [
            attachment_view(thread_id, row)
            for row in await attachment_list(conn, user.uid, thread_id)
        ]

    @delete("/attachments/{attachment_id:uuid}", summary="Remove an attachment and its file")
    async def detach(
        self,
        state: State,
        user: NamedDependency[User],
        thread_id: FromPath[UUID],
        attachment_id: FromPath[UUID],
    ) -> None:
        pool = state.yuxi.pool
        async with pool.connection() as conn:
            root = await conversation_root(state, conn, user.uid, thread_id)
        await remove_attachment(pool, user.uid, thread_id, root, attachment_id)

    @get("/files", summary="A directory of the conversation's workdir")
    async def files(
        self,
        state: State,
        conn: Conn,
        user: NamedDependency[User],
        thread_id: FromPath[UUID],
        path: Annotated[str, Parameter(description="relative to the workdir")] = "",
    ) -> FileListing:
        root = await conversation_root(state, conn, user.uid, thread_id)
        return await asyncio.to_thread(_listing, root, path)

    @get(
        "/files/content",
        summary="One file of the conversation's workdir, streamed",
    )
    async def content(
        self,
        state: State,
        conn: Conn,
        user: NamedDependency[User],
        thread_id: FromPath[UUID],
        path: Annotated[str, Parameter(description="relative to the workdir")],
        download: Annotated[bool, Parameter(description="Content-Disposition: attachment")] = False,
    ) -> Stream:
        root = await conversation_root(state, conn, user.uid, thread_id)
        target, fd, size = await asyncio.to_thread(_open_file, root, path)
        entry_type = media_type(target.name)  # litestar adds charset=utf-8 to text/*
        disposition = "attachment" if download else "inline"
        return Stream(
            _chunks(fd),
            media_type=entry_type,
            headers={
                "Content-Length": str(size),
                "Content-Disposition": _disposition(disposition, target.name),
                "X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": SANDBOX,
            },
        )

    @get("/artifacts", summary="What the agent wrote under outputs/")
    async def artifacts(
        self, state: State, conn: Conn, user: NamedDependency[User], thread_id: FromPath[UUID]
    ) -> ArtifactListing:
        root = await conversation_root(state, conn, user.uid, thread_id)
        entries, truncated = await asyncio.to_thread(_outputs, root)
        return ArtifactListing([entry_view(e) for e in entries], truncated)


def _listing(root: Path, raw: str) -> FileListing:
    if not root.is_dir():  # nothing written yet: an empty workdir
        if raw.strip("/.") == "":
            return FileListing(".", [], False)
        raise NotFound(f"no such directory: {raw}")
    target = confined(root, raw)
    if not target.exists():
        raise NotFound(f"no such directory: {raw}")
    if not target.is_dir():
        raise InvalidInput(f"{raw} is a file; read it with files/content")
    base = root.resolve()
    entries, truncated = list_directory(base, target)
    return FileListing(shown(base, target), [entry_view(e) for e in entries], truncated)


def _outputs(root: Path) -> tuple[list[Entry], bool]:
    if not root.is_dir():
        return [], False
    base = root.resolve()
    try:
        outputs = confined(base, OUTPUTS)
    except BadPath:
        return [], False  # outputs/ is a link leading out: nothing of it is shown
    return walk_files(base, outputs)


def _open_file(root: Path, raw: str) -> tuple[Path, int, int]:
    target = confined(root, raw)
    try:
        fd = os.open(
            target, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        )
    except FileNotFoundError:
        raise NotFound(f"no such file: {raw}") from None
    except OSError as error:
        raise InvalidInput(f"cannot read {raw}: {error.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise InvalidInput(f"{raw} is not a file")
    return target, fd, info.st_size


async def _chunks(fd: int) -> AsyncIterator[bytes]:
    try:
        while True:
            data = await asyncio.to_thread(os.read, fd, CHUNK)
            if not data:
                return
            yield data
    finally:
        os.close(fd)


def _disposition(kind: str, name: str) -> str:
    fallback = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "_" for c in name)
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"
