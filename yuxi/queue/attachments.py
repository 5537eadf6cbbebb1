"""Attachments (``yuxi.attachment_*``): files a user attached to a conversation, each
``uploads/<filename>`` of its workdir tree in the file store. The files themselves are
yuxi/files/attachments.py's; these record them."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.calls import call_many, call_one, call_scalar


class Attachment(msgspec.Struct, frozen=True):
    """A row of ``yuxi.attachment_list``; ``uid`` is the uploader."""

    id: UUID
    filename: str
    bytes: int
    sha256: str
    media_type: str
    created_at: datetime
    uid: UUID

    @property
    def path(self) -> str:
        """Where it lies, relative to the conversation's workdir."""
        return f"uploads/{self.filename}"


class AddedAttachment(Attachment, frozen=True):
    """A row of ``yuxi.attachment_add``: ``created`` is false when the same name and
    content were already attached (nothing new was stored)."""

    created: bool


async def attachment_add(
    conn: AsyncConnection[Any],
    uid: UUID,
    thread_id: UUID,
    *,
    filename: str,
    size: int,
    sha256: str,
    media_type: str,
    thread_limit: int,
    taken: list[str],
) -> AddedAttachment:
    """Records an upload under the conversation's lock: a free name (``taken``: the
    names already under uploads/ of the workdir tree), or the attachment already there
    with the same name and content. PayloadTooLarge past the thread's limit."""
    return await call_one(
        conn,
        AddedAttachment,
        "yuxi.attachment_add(p_uid => %(uid)s, p_thread_id => %(thread_id)s,"
        " p_filename => %(filename)s, p_bytes => %(bytes)s, p_sha256 => %(sha256)s,"
        " p_media_type => %(media_type)s, p_thread_limit => %(thread_limit)s,"
        " p_taken => %(taken)s)",
        {
            "uid": uid,
            "thread_id": thread_id,
            "filename": filename,
            "bytes": size,
            "sha256": sha256,
            "media_type": media_type,
            "thread_limit": thread_limit,
            "taken": taken,
        },
    )


async def attachment_list(
    conn: AsyncConnection[Any], uid: UUID, thread_id: UUID
) -> list[Attachment]:
    return await call_many(
        conn,
        Attachment,
        "yuxi.attachment_list(p_uid => %(uid)s, p_thread_id => %(thread_id)s)",
        {"uid": uid, "thread_id": thread_id},
    )


async def attachment_delete(
    conn: AsyncConnection[Any], uid: UUID, thread_id: UUID, attachment_id: UUID
) -> str:
    """Removes the row; returns the stored name (the caller deletes the file, in the
    same transaction)."""
    return str(
        await call_scalar(
            conn,
            "SELECT yuxi.attachment_delete(p_uid => %(uid)s, p_thread_id => %(thread_id)s,"
            " p_id => %(id)s)",
            {"uid": uid, "thread_id": thread_id, "id": attachment_id},
        )
    )


async def message_refer_attachments(
    conn: AsyncConnection[Any], uid: UUID, message_id: int, ids: list[UUID]
) -> None:
    """Records the thread's attachments the user message refers to (once);
    InvalidInput names any id that is not an attachment of the message's thread."""
    await call_scalar(
        conn,
        "SELECT yuxi.message_refer_attachments(%(uid)s, %(message_id)s, %(ids)s::uuid[])",
        {"uid": uid, "message_id": message_id, "ids": ids},
    )
