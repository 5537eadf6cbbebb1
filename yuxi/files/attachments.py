"""Storing attachments: an upload streams into a staging file in the conversation's
``uploads/`` (hashed and counted as it arrives, never held in memory), then one
transaction records every file of the request (``yuxi.attachment_add``, under the
conversation's lock) and links each into place under its stored name. If anything
fails, nothing stays: files linked so far are removed, and staging files always are.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from yuxi.files.workdir import (
    STAGING_PREFIX,
    UPLOADS,
    BadPath,
    confined,
    media_type,
    safe_filename,
)
from yuxi.queue.attachments import AddedAttachment, attachment_add, attachment_delete
from yuxi.queue.errors import PayloadTooLarge, QueueError

FLUSH_BYTES = 1024 * 1024
_LINK_ATTEMPTS = 5


def uploads_dir(workdir: Path) -> Path:
    """``uploads/`` of the workdir, created when missing (never a link leading out)."""
    workdir.mkdir(parents=True, exist_ok=True)
    uploads = confined(workdir, UPLOADS)
    uploads.mkdir(exist_ok=True)
    return uploads


@dataclass
class StagedFile:
    """One uploaded file, written to a staging file of ``uploads/``, not yet recorded."""

    uploads: Path
    filename: str
    media_type: str
    limit: int
    path: Path = field(init=False)
    size: int = 0
    _digest: Any = field(default_factory=hashlib.sha256, repr=False)
    _buffer: bytearray = field(default_factory=bytearray, repr=False)
    _fd: int = -1

    @classmethod
    async def open(
        cls, uploads: Path, raw_name: str | None, declared_type: str | None, *, limit: int
    ) -> StagedFile:
        name = safe_filename(raw_name)
        staged = cls(uploads, name, media_type(name, declared_type), limit)
        staged.path = uploads / f"{STAGING_PREFIX}{uuid.uuid4().hex}.part"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        staged._fd = await asyncio.to_thread(os.open, staged.path, flags, 0o644)
        return staged

    @property
    def sha256(self) -> str:
        return str(self._digest.hexdigest())

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        """Adds a piece of the file; PayloadTooLarge once it passes the limit."""
        self.size += len(data)
        if self.size > self.limit:
            raise PayloadTooLarge(
                f"{self.filename} is larger than the {self.limit} bytes a file may have"
            )
        self._digest.update(data)
        self._buffer += data
        if len(self._buffer) >= FLUSH_BYTES:
            await self._flush()

    async def close(self) -> None:
        """Writes what is buffered and closes the staging file (it stays on disk)."""
        if self._fd < 0:
            return
        try:
            await self._flush()
        finally:
            fd, self._fd = self._fd, -1
            os.close(fd)

    async def discard(self) -> None:
        with contextlib.suppress(OSError):
            if self._fd >= 0:
                fd, self._fd = self._fd, -1
                os.close(fd)
        with contextlib.suppress(OSError):
            self.path.unlink()

    async def _flush(self) -> None:
        if not self._buffer:
            return
        data, self._buffer = bytes(self._buffer), bytearray()
        await asyncio.to_thread(_write_all, self._fd, data)


_IMAGE_TYPES = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
)


def image_extension(data: bytes) -> str | None:
    """png, jpg, gif or webp by the image's first bytes; None for anything else."""
    for magic, extension in _IMAGE_TYPES:
        if data.startswith(magic):
            return extension
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


async def stage_bytes(uploads: Path, name: str, data: bytes, *, limit: int) -> StagedFile:
    """``data`` (already in memory, e.g. a run body's image) as a staged upload."""
    staged = await StagedFile.open(uploads, name, None, limit=limit)
    try:
        await staged.write(data)
        await staged.close()
    except BaseException:
        await staged.discard()
        raise
    return staged


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


@contextlib.asynccontextmanager
async def attaching(
    conn: AsyncConnection[Any],
    uid: UUID,
    thread_id: UUID,
    files: list[StagedFile],
    *,
    thread_limit: int,
) -> AsyncIterator[list[AddedAttachment]]:
    """A transaction that records ``files`` (closed) and links each to
    ``uploads/<stored name>``; the caller may do more in it before it commits. If the
    block or the commit fails, the linked files are removed again; staging files are
    removed whatever happens."""
    placed: list[Path] = []
    try:
        async with conn.transaction():
            rows = []
            taken = await asyncio.to_thread(_names, files[0].uploads) if files else []
            for staged in files:
                rows.append(
                    await _record(conn, uid, thread_id, staged, taken, thread_limit, placed)
                )
            yield rows
    except BaseException:
        for path in placed:
            with contextlib.suppress(OSError):
                path.unlink()
        raise
    finally:
        for staged in files:
            await staged.discard()


async def commit_attachments(
    pool: AsyncConnectionPool[Any],
    uid: UUID,
    thread_id: UUID,
    files: list[StagedFile],
    *,
    thread_limit: int,
) -> list[AddedAttachment]:
    """Records ``files`` in a transaction of their own (see ``attaching``)."""
    async with (
        pool.connection() as conn,
        attaching(conn, uid, thread_id, files, thread_limit=thread_limit) as rows,
    ):
        return rows


async def _record(
    conn: AsyncConnection[Any],
    uid: UUID,
    thread_id: UUID,
    staged: StagedFile,
    taken: list[str],
    thread_limit: int,
    placed: list[Path],
) -> AddedAttachment:
    for _attempt in range(_LINK_ATTEMPTS):
        try:
            # a savepoint per try: a name another writer took meanwhile is tried again
            async with conn.transaction():
                row = await attachment_add(
                    conn,
                    uid,
                    thread_id,
                    filename=staged.filename,
                    size=staged.size,
                    sha256=staged.sha256,
                    media_type=staged.media_type,
                    thread_limit=thread_limit,
                    taken=taken,
                )
                if not row.created:
                    return row
                final = staged.uploads / row.filename
                try:
                    await asyncio.to_thread(os.link, staged.path, final)
                except FileExistsError:
                    taken.append(row.filename)
                    raise _NameTaken from None
        except _NameTaken:
            continue
        placed.append(final)
        taken.append(row.filename)
        return row
    raise NameConflict(f"no free name for {staged.filename} in uploads/; retry the upload")


class _NameTaken(Exception):
    """A file appeared at the stored name between the listing and the link."""


class NameConflict(QueueError):
    code = "attachment_conflict"


def _names(uploads: Path) -> list[str]:
    try:
        return [name for name in os.listdir(uploads) if not name.startswith(STAGING_PREFIX)]
    except OSError:
        return []


async def remove_attachment(
    pool: AsyncConnectionPool[Any], uid: UUID, thread_id: UUID, workdir: Path, attachment_id: UUID
) -> None:
    """Removes the attachment's row, then (once that committed) its file."""
    async with pool.connection() as conn:
        name = await attachment_delete(conn, uid, thread_id, attachment_id)
    with contextlib.suppress(OSError):
        await asyncio.to_thread((workdir / UPLOADS / name).unlink)


_IMAGE_MEDIA_TYPES = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
}
# what one image may weigh when it is sent to a model (base64 makes it a third larger)
IMAGE_TO_MODEL_MAX_BYTES = 20 * 1024 * 1024


def image_blocks(
    workdir: Path, attachments: list[dict[str, Any]], referred: list[str] | None
) -> list[dict[str, Any]]:
    """The images among the attachments a message refers to, as OpenAI-style
    ``image_url`` content blocks (base64 data URLs), for a model with vision. A file is
    an image by its bytes (PNG, JPEG, GIF, WebP), read confined to the workdir; one that
    is gone, not an image or larger than IMAGE_TO_MODEL_MAX_BYTES is left out (the
    prompt still lists it by path)."""
    wanted = set(referred or [])
    blocks = []
    for item in attachments:
        if str(item.get("id")) not in wanted:
            continue
        try:
            path = confined(workdir, str(item.get("path")))
            if path.stat().st_size > IMAGE_TO_MODEL_MAX_BYTES:
                continue
            data = path.read_bytes()
        except (OSError, BadPath):
            continue
        kind = image_extension(data)
        if kind is None:
            continue
        encoded = base64.b64encode(data).decode("ascii")
        url = f"data:{_IMAGE_MEDIA_TYPES[kind]};base64,{encoded}"
        blocks.append({"type": "image_url", "image_url": {"url": url}})
    return blocks
