"""A LangGraph input message's image and file blocks as attachments of the thread: each
decoded, stored in the thread's workdir tree at ``uploads/<name>`` and referred to by
the user message, in the submit's own transaction (a refused run leaves no file). A
model with vision gets the images as image content, as with the native API's
``image_content``; documents are files the agent's file tools read."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from yuxi.api.lg.body import Block
from yuxi.api.routes.runs import decode_image
from yuxi.files.attachments import HeldFile, attaching, image_extension, stage_bytes
from yuxi.queue.attachments import AddedAttachment
from yuxi.queue.errors import InvalidInput, PayloadTooLarge
from yuxi.queue.files import thread_file_tree
from yuxi.settings import Settings


def held_files(blocks: list[Block], settings: Settings) -> list[HeldFile]:
    limit = settings.attachment_max_bytes
    return [_held(block, limit) for block in blocks]


def _held(block: Block, limit: int) -> HeldFile:
    if block.kind == "image":
        data = decode_image(block.data, limit=limit)
        extension = image_extension(data)
    else:
        if len(block.data) > (limit * 4) // 3 + 4:
            raise PayloadTooLarge(f"a file block is larger than the {limit} bytes a file may have")
        try:
            data = base64.b64decode(block.data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidInput("a file block's data is not valid base64") from None
        extension = "pdf" if block.mime_type == "application/pdf" else "bin"
    digest = hashlib.sha256(data).hexdigest()[:12]
    name = block.filename or f"{block.kind}-{digest}.{extension}"
    return stage_bytes(name, data, limit=limit)


@asynccontextmanager
async def attached(
    conn: AsyncConnection[Any],
    uid: UUID,
    thread_id: UUID,
    files: list[HeldFile],
    settings: Settings,
) -> AsyncIterator[list[AddedAttachment]]:
    """The transaction the run is submitted in, with ``files`` recorded and linked."""
    tree = await thread_file_tree(conn, uid, thread_id) if files else None
    async with attaching(
        conn, uid, thread_id, tree, files, thread_limit=settings.thread_attachments_max_bytes
    ) as added:
        yield added
