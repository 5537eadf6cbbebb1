"""Storing attachments in the file store, in the conversation's workdir tree. An uploaded
file streams into an upload of the store as it arrives (``FileStore.upload``: 1 MiB
chunks committed as they fill, never the whole file in memory); bytes already in memory
(a run body's image) are held as they are. Then one transaction records every file of
the request (``yuxi.attachment_add``, under the conversation's lock: the stored name,
the thread's limit) and links each at ``uploads/<stored name>`` (``Upload.put(...,
conn=conn)``; ``yuxi.file_write`` for held bytes). If anything fails, nothing stays: the
transaction rolls back and every upload is aborted (what a lost process leaves, the
collector removes once its writer's lease runs out).

The worker reads the same files from its cache of the store; ``image_blocks`` reads
them there.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import weakref
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from uuid import UUID

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from yuxi.files.store import FileStore, Upload
from yuxi.files.workdir import UPLOADS, BadPath, confined, media_type, safe_filename
from yuxi.queue.attachments import AddedAttachment, attachment_add, attachment_delete
from yuxi.queue.errors import PayloadTooLarge, QueueError
from yuxi.queue.files import file_delete, file_get, file_list, file_write

log = logging.getLogger("yuxi.files")

_LINK_ATTEMPTS = 5

# A transaction linking uploads holds a pooled connection while it waits for the
# conversation's lock, and Upload.put sends a file's last piece over a second one: were
# every connection of the pool held by uploads waiting for that lock, the one holding it
# would get no second one (each would end in a 503). So the commits to one tree take
# turns in this process before they take a connection. (Not needed once put sends that
# piece over the connection it is given.)
_turns: weakref.WeakValueDictionary[UUID, asyncio.Lock] = weakref.WeakValueDictionary()


def linking_turn(tree: UUID) -> asyncio.Lock:
    """This process's turn to link uploads into ``tree``: held before the connection of
    the transaction that links them is taken."""
    turn = _turns.get(tree)
    if turn is None:
        turn = _turns[tree] = asyncio.Lock()
    return turn


class Attachable(Protocol):
    """A file to record as an attachment: its name, type, size and digest, known before
    the transaction that links it."""

    filename: str
    media_type: str
    linked: bool

    @property
    def size(self) -> int: ...

    @property
    def sha256(self) -> str: ...

    async def link(self, conn: AsyncConnection[Any], tree: UUID, path: str, uid: UUID) -> None:
        """Puts the file at ``path`` of ``tree`` in ``conn``'s transaction."""
        ...

    async def discard(self) -> None:
        """Gives it up: nothing of it stays unless a commit linked it."""
        ...


def _limited(filename: str, size: int, limit: int) -> None:
    if size > limit:
        raise PayloadTooLarge(f"{filename} is larger than the {limit} bytes a file may have")


@dataclass
class ReceivedFile:
    """One uploaded file streaming into the store, with the name and media type it is
    recorded under; linked nowhere until ``attaching`` does. ``limit`` bounds its size
    (PayloadTooLarge past it, before the piece that passes it is sent)."""

    upload: Upload
    filename: str
    media_type: str
    limit: int
    linked: bool = field(default=False, init=False)

    @classmethod
    def open(
        cls,
        files: FileStore,
        owner_uid: UUID,
        raw_name: str | None,
        declared_type: str | None,
        *,
        limit: int,
    ) -> ReceivedFile:
        """A new upload of ``owner_uid`` named after the client's ``raw_name``."""
        name = safe_filename(raw_name)
        return cls(files.upload(owner_uid), name, media_type(name, declared_type), limit)

    @property
    def size(self) -> int:
        return self.upload.size

    @property
    def sha256(self) -> str:
        return self.upload.sha256

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        """Adds a piece of the file; PayloadTooLarge once it passes the limit."""
        _limited(self.filename, self.upload.size + len(data), self.limit)
        await self.upload.write(data)

    async def link(self, conn: AsyncConnection[Any], tree: UUID, path: str, uid: UUID) -> None:
        await self.upload.put(tree, path, media_type=self.media_type, writer_uid=uid, conn=conn)
        self.linked = True

    async def discard(self) -> None:
        try:
            await self.upload.abort()
        except Exception as error:  # the collector removes it once its lease runs out
            log.warning("an upload could not be aborted: %s", error)


@dataclass
class HeldFile:
    """A file whose bytes are in memory anyway (a run body's image): written in the
    linking transaction itself, on its connection, so nothing of it is sent before and
    no second connection is needed."""

    data: bytes
    filename: str
    media_type: str
    linked: bool = field(default=False, init=False)

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    async def link(self, conn: AsyncConnection[Any], tree: UUID, path: str, uid: UUID) -> None:
        await file_write(conn, tree, path, self.data, media_type=self.media_type, writer_uid=uid)
        self.linked = True

    async def discard(self) -> None:
        return None  # nothing was sent


async def discard_all(files: Sequence[Attachable]) -> None:
    for item in files:
        await item.discard()


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


def stage_bytes(name: str, data: bytes, *, limit: int) -> HeldFile:
    """``data`` (already in memory, e.g. a run body's image) as a file for ``attaching``
    to record and link; PayloadTooLarge past ``limit``."""
    filename = safe_filename(name)
    held = HeldFile(data, filename, media_type(filename))
    _limited(held.filename, held.size, limit)
    return held


async def uploads_taken(conn: AsyncConnection[Any], tree: UUID) -> list[str]:
    """The names directly under ``uploads/`` of the tree: its files, and the
    directories its deeper files lie in (a stored name never takes either)."""
    prefix = f"{UPLOADS}/"
    names = {
        info.path[len(prefix) :].split("/", 1)[0] for info in await file_list(conn, tree, UPLOADS)
    }
    return sorted(names)


@contextlib.asynccontextmanager
async def attaching(
    conn: AsyncConnection[Any],
    uid: UUID,
    thread_id: UUID,
    tree: UUID | None,
    files: Sequence[Attachable],
    *,
    thread_limit: int,
) -> AsyncIterator[list[AddedAttachment]]:
    """A transaction that records ``files`` (complete) as attachments of the thread and
    links each at ``uploads/<stored name>`` of ``tree`` (the thread's workdir tree;
    None only without files); the caller may do more in it before it commits. Whatever
    happens, the files are given up afterwards but for those linked by a commit that
    went through: a failed block or commit leaves nothing."""
    committed = False
    try:
        async with conn.transaction():
            rows = []
            if files:
                if tree is None:
                    raise ValueError("attachments need the tree they are linked in")
                taken = await uploads_taken(conn, tree)
                for item in files:
                    rows.append(
                        await _record(conn, uid, thread_id, tree, item, taken, thread_limit)
                    )
            yield rows
        committed = True
    finally:
        for item in files:
            if not (committed and item.linked):
                await item.discard()


async def commit_attachments(
    pool: AsyncConnectionPool[Any],
    uid: UUID,
    thread_id: UUID,
    tree: UUID,
    files: Sequence[Attachable],
    *,
    thread_limit: int,
) -> list[AddedAttachment]:
    """Records ``files`` in a transaction of their own (see ``attaching``), in this
    process's turn for the tree."""
    entered = False
    try:
        async with linking_turn(tree), pool.connection() as conn:
            entered = True
            async with attaching(
                conn, uid, thread_id, tree, files, thread_limit=thread_limit
            ) as rows:
                return rows
    finally:
        if not entered:  # no turn or no connection: attaching never ran to give them up
            await discard_all(files)


async def _record(
    conn: AsyncConnection[Any],
    uid: UUID,
    thread_id: UUID,
    tree: UUID,
    item: Attachable,
    taken: list[str],
    thread_limit: int,
) -> AddedAttachment:
    for _attempt in range(_LINK_ATTEMPTS):
        try:
            # a savepoint per try: a name a writer took meanwhile is tried again
            async with conn.transaction():
                row = await attachment_add(
                    conn,
                    uid,
                    thread_id,
                    filename=item.filename,
                    size=item.size,
                    sha256=item.sha256,
                    media_type=item.media_type,
                    thread_limit=thread_limit,
                    taken=taken,
                )
                present = await file_get(conn, tree, row.path) is not None
                if row.created and present:
                    # the agent wrote a file at that name since the listing: never replaced
                    taken.append(row.filename)
                    raise _NameTaken
                if not present:  # new, or the same bytes again whose file was removed
                    await item.link(conn, tree, row.path, uid)
        except _NameTaken:
            continue
        taken.append(row.filename)
        return row
    raise NameConflict(f"no free name for {item.filename} in uploads/; retry the upload")


class _NameTaken(Exception):
    """A file appeared at the stored name between the listing and the link."""


class NameConflict(QueueError):
    code = "attachment_conflict"


async def remove_attachment(
    pool: AsyncConnectionPool[Any], uid: UUID, thread_id: UUID, tree: UUID, attachment_id: UUID
) -> None:
    """Removes the attachment's row and its file (``uploads/<name>`` of ``tree``) in one
    transaction; its content goes with the collector."""
    async with pool.connection() as conn, conn.transaction():
        name = await attachment_delete(conn, uid, thread_id, attachment_id)
        await file_delete(conn, tree, f"{UPLOADS}/{name}")


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
