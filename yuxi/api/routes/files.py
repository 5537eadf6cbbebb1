"""A conversation's files: attachments (uploads/), the workdir viewer, artifacts (outputs/).

Every file comes from the file store (the conversation's workdir tree, yuxi/files/store.py)
and is streamed from its chunks: the API reads and writes no disk for them. Paths in and
out are relative to the workdir; one that is absolute, names ``..``, holds a NUL or a
backslash, or is overlong is a 400 (``invalid_input``). Directories are what the paths
of the files under them say: a tree has no empty ones and no symbolic links.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from urllib.parse import quote
from uuid import UUID

import msgspec
from litestar import Controller, Request, Response, delete, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, Parameter
from litestar.response import Stream
from psycopg import AsyncConnection

from yuxi.api.auth import User
from yuxi.api.dependencies import caller_briefly
from yuxi.api.errors import error_response
from yuxi.api.ranges import Unsatisfiable, byte_range
from yuxi.api.uploads import read_files
from yuxi.files.attachments import commit_attachments, remove_attachment
from yuxi.files.store import FileStore
from yuxi.files.workdir import MAX_ENTRIES, OUTPUTS, client_relative, media_type
from yuxi.queue.attachments import Attachment, attachment_list
from yuxi.queue.errors import InvalidInput, NotFound
from yuxi.queue.files import FileInfo

Conn = NamedDependency[AsyncConnection[Any]]
# the routes that work through the file store, which takes a pooled connection for each
# statement: the caller is checked on one of its own, held by none of them meanwhile (an
# upload streams for as long as its client sends)
BRIEFLY = {"user": Provide(caller_briefly)}
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
    """A workdir entry; ``kind`` is file or directory (symlink: only in a listing of a
    directory on a disk, a link leading outside it); ``path`` is relative to the workdir."""

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


def file_entry(info: FileInfo) -> FileEntry:
    """A file of the store as a listing shows it."""
    name = info.path.rsplit("/", 1)[-1]
    return FileEntry(
        name, info.path, "file", info.bytes, info.modified_at, media_type(name, info.media_type)
    )


def directory_entries(files: list[FileInfo], directory: str) -> tuple[list[FileEntry], bool]:
    """One level of ``directory`` ('' for the root) from the files under it: its files,
    and a directory for each first component deeper paths share (modified when its
    newest file was); directories first, then by name, at most MAX_ENTRIES, and
    whether more were left out."""
    skip = len(directory) + 1 if directory else 0
    entries: list[FileEntry] = []
    newest: dict[str, datetime] = {}
    for info in files:
        name, deeper, _ = info.path[skip:].partition("/")
        if deeper:
            if name not in newest or info.modified_at > newest[name]:
                newest[name] = info.modified_at
        else:
            entries.append(file_entry(info))
    for name, modified in newest.items():
        path = f"{directory}/{name}" if directory else name
        entries.append(FileEntry(name, path, "directory", None, modified, None))
    entries.sort(key=lambda e: (e.kind != "directory", e.name))
    return entries[:MAX_ENTRIES], len(entries) > MAX_ENTRIES


async def file_entries(
    files: FileStore, tree: UUID, prefix: str = ""
) -> tuple[list[FileEntry], bool]:
    """Every file of the tree (under ``prefix``), by path: at most MAX_ENTRIES, and
    whether more were left out."""
    found = await files.list(tree, prefix)
    return [file_entry(info) for info in found[:MAX_ENTRIES]], len(found) > MAX_ENTRIES


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


def _in_tree(raw: str) -> str:
    """A client's path as a path of the tree ('' for the workdir itself); BadPath."""
    relative = client_relative(raw).as_posix()
    return "" if relative == "." else relative


class FilesController(Controller):
    path = "/api/chat/thread/{thread_id:uuid}"
    tags = ("files",)

    @post(
        "/attachments",
        status_code=201,
        summary="Attach files (multipart/form-data, one part named file per file)",
        request_max_body_size=None,  # checked as the body streams in (uploads.py)
        dependencies=BRIEFLY,
    )
    async def attach(
        self,
        request: Request[Any, Any, Any],
        state: State,
        user: NamedDependency[User],
        thread_id: FromPath[UUID],
    ) -> list[AttachmentView]:
        settings = state.yuxi.settings
        files: FileStore = state.yuxi.files
        tree = await files.workdir_tree(user.uid, thread_id)  # 404 before the body is read
        received = await read_files(
            request,
            files,
            user.uid,
            file_limit=settings.attachment_max_bytes,
            request_limit=settings.thread_attachments_max_bytes + 1024 * 1024,
        )
        rows = await commit_attachments(
            state.yuxi.pool,
            user.uid,
            thread_id,
            tree,
            received,
            thread_limit=settings.thread_attachments_max_bytes,
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

    @delete(
        "/attachments/{attachment_id:uuid}",
        summary="Remove an attachment and its file",
        dependencies=BRIEFLY,
    )
    async def detach(
        self,
        state: State,
        user: NamedDependency[User],
        thread_id: FromPath[UUID],
        attachment_id: FromPath[UUID],
    ) -> None:
        tree = await state.yuxi.files.workdir_tree(user.uid, thread_id)
        await remove_attachment(state.yuxi.pool, user.uid, thread_id, tree, attachment_id)

    @get("/files", summary="A directory of the conversation's workdir", dependencies=BRIEFLY)
    async def files(
        self,
        state: State,
        user: NamedDependency[User],
        thread_id: FromPath[UUID],
        path: Annotated[str, Parameter(description="relative to the workdir")] = "",
    ) -> FileListing:
        files: FileStore = state.yuxi.files
        tree = await files.workdir_tree(user.uid, thread_id)
        directory = _in_tree(path)
        under = await files.list(tree, directory)
        if not under and directory:
            if await files.get(tree, directory) is not None:
                raise InvalidInput(f"{path} is a file; read it with files/content")
            raise NotFound(f"no such directory: {path}")
        entries, truncated = directory_entries(under, directory)
        return FileListing(directory or ".", entries, truncated)

    @get(
        "/files/content",
        summary="One file of the conversation's workdir, streamed (Range: bytes=...)",
        dependencies=BRIEFLY,
    )
    async def content(
        self,
        request: Request[Any, Any, Any],
        state: State,
        user: NamedDependency[User],
        thread_id: FromPath[UUID],
        path: Annotated[str, Parameter(description="relative to the workdir")],
        download: Annotated[bool, Parameter(description="Content-Disposition: attachment")] = False,
    ) -> Response[Any]:
        files: FileStore = state.yuxi.files
        tree = await files.workdir_tree(user.uid, thread_id)
        where = _in_tree(path)
        info = await files.get(tree, where) if where else None
        if info is None:
            if not where or await files.list(tree, where):
                raise InvalidInput(f"{path} is not a file")
            raise NotFound(f"no such file: {path}")
        name = where.rsplit("/", 1)[-1]
        entry_type = media_type(name, info.media_type)  # litestar adds charset=utf-8 to text/*
        etag = f'"{info.sha256}"'
        headers = {
            "ETag": etag,
            "Accept-Ranges": "bytes",
            "Content-Disposition": _disposition("attachment" if download else "inline", name),
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": SANDBOX,
        }
        if _matches(request.headers.get("if-none-match"), etag):
            return Response(b"", status_code=304, media_type=entry_type, headers=headers)
        try:
            wanted = byte_range(
                request.headers.get("range"),
                info.bytes,
                etag=etag,
                if_range=request.headers.get("if-range"),
            )
        except Unsatisfiable as refused:
            response = error_response(416, "range_not_satisfiable", str(refused))
            response.headers.update({"Content-Range": refused.content_range, "ETag": etag})
            return response
        if wanted is None:
            headers["Content-Length"] = str(info.bytes)
            return Stream(files.stream(info), media_type=entry_type, headers=headers)
        headers["Content-Length"] = str(wanted.length)
        headers["Content-Range"] = wanted.content_range
        return Stream(
            files.stream(info, wanted.start, wanted.end),
            status_code=206,
            media_type=entry_type,
            headers=headers,
        )

    @get("/artifacts", summary="What the agent wrote under outputs/", dependencies=BRIEFLY)
    async def artifacts(
        self, state: State, user: NamedDependency[User], thread_id: FromPath[UUID]
    ) -> ArtifactListing:
        files: FileStore = state.yuxi.files
        tree = await files.workdir_tree(user.uid, thread_id)
        entries, truncated = await file_entries(files, tree, OUTPUTS)
        return ArtifactListing(entries, truncated)


def _matches(if_none_match: str | None, etag: str) -> bool:
    """Whether an ``If-None-Match`` names the file's ETag (weakly compared) or is ``*``."""
    if if_none_match is None:
        return False
    tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
    return "*" in tags or etag in tags


def _disposition(kind: str, name: str) -> str:
    fallback = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "_" for c in name)
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"
