"""Reading a ``multipart/form-data`` upload as it arrives: each part named ``file`` goes
straight into an upload of the file store (yuxi/files/attachments.py ``ReceivedFile``:
1 MiB chunks committed as they fill), so a request of any size holds no more than one
network chunk and one chunk of the store in memory. Other parts are read and ignored.
Nothing is linked at a path here; on any failure every upload is given up."""

from __future__ import annotations

import contextlib
from typing import Any
from uuid import UUID

import multipart  # type: ignore[import-untyped]
from litestar import Request

from yuxi.files.attachments import ReceivedFile, discard_all
from yuxi.files.store import FileStore
from yuxi.queue.errors import InvalidInput, PayloadTooLarge

FILE_FIELD = "file"
MAX_PARTS = 100
# after a refusal, how much more of the body is read (and dropped) so that the client,
# still sending, reads the 413 instead of a reset connection
DRAIN_BYTES = 64 * 1024 * 1024


def boundary_of(request: Request[Any, Any, Any]) -> str:
    """The multipart boundary; InvalidInput unless the body is multipart/form-data."""
    kind, options = multipart.parse_options_header(request.headers.get("content-type", ""))
    boundary = options.get("boundary")
    if kind != "multipart/form-data" or not boundary:
        raise InvalidInput("send the files as multipart/form-data, one part named file per file")
    return str(boundary)


async def read_files(
    request: Request[Any, Any, Any],
    files: FileStore,
    owner_uid: UUID,
    *,
    file_limit: int,
    request_limit: int,
) -> list[ReceivedFile]:
    """Every ``file`` part of the request, streamed into uploads of ``owner_uid`` (every
    piece written, none linked yet). PayloadTooLarge when one file passes
    ``file_limit`` or the body ``request_limit`` (the rest of the body is drained so
    the client reads the 413); InvalidInput for a malformed body or one without files.
    Nothing of the request stays on failure, a dropped client's included."""
    boundary = boundary_of(request)
    received: list[ReceivedFile] = []
    current: ReceivedFile | None = None
    size = 0
    body = request.stream()
    try:
        with multipart.PushMultipartParser(boundary, max_segment_count=MAX_PARTS) as parser:
            async for chunk in body:
                size += len(chunk)
                if size > request_limit:
                    raise PayloadTooLarge(
                        f"the request is larger than the {request_limit} bytes accepted"
                    )
                for event in parser.parse(chunk):
                    if isinstance(event, multipart.MultipartSegment):
                        current = _start(event, files, owner_uid, file_limit)
                        if current is not None:
                            received.append(current)
                    elif event:
                        if current is not None:
                            await current.write(event)
                    else:
                        current = None
                if parser.closed:
                    break
    except multipart.MultipartError as error:
        await discard_all(received)
        raise InvalidInput(f"the multipart/form-data body is malformed: {error}") from None
    except PayloadTooLarge:
        await discard_all(received)
        await _drain(body)
        raise
    except BaseException:  # a client that went away, a database outage, a cancel
        await discard_all(received)
        raise
    if not received:
        raise InvalidInput("the body has no file: send each file as a part named file")
    return received


def _start(segment: Any, files: FileStore, owner_uid: UUID, file_limit: int) -> ReceivedFile | None:
    if segment.name != FILE_FIELD:
        return None
    if segment.filename is None:
        raise InvalidInput("a part named file needs a filename")
    return ReceivedFile.open(
        files, owner_uid, segment.filename, segment.content_type, limit=file_limit
    )


async def _drain(body: Any) -> None:
    dropped = 0
    with contextlib.suppress(Exception):
        async for chunk in body:
            dropped += len(chunk)
            if dropped > DRAIN_BYTES:
                break
