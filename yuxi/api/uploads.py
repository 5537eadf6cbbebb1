"""Reading a ``multipart/form-data`` upload as it arrives: each part named ``file`` goes
straight into a staging file of the conversation's ``uploads/`` (yuxi/files/attachments.py),
so a request of any size holds no more than one network chunk and one flush buffer in
memory. Other parts are read and ignored."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import multipart  # type: ignore[import-untyped]
from litestar import Request

from yuxi.files.attachments import StagedFile
from yuxi.queue.errors import InvalidInput, NotFound, PayloadTooLarge

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
    uploads: Path,
    *,
    file_limit: int,
    request_limit: int,
) -> list[StagedFile]:
    """Every ``file`` part of the request, staged and closed. PayloadTooLarge when one
    file passes ``file_limit`` or the body ``request_limit``; InvalidInput for a
    malformed body or one without files. Nothing is left behind on failure."""
    boundary = boundary_of(request)
    staged: list[StagedFile] = []
    current: StagedFile | None = None
    received = 0
    body = request.stream()
    try:
        with multipart.PushMultipartParser(boundary, max_segment_count=MAX_PARTS) as parser:
            async for chunk in body:
                received += len(chunk)
                if received > request_limit:
                    raise PayloadTooLarge(
                        f"the request is larger than the {request_limit} bytes accepted"
                    )
                for event in parser.parse(chunk):
                    if isinstance(event, multipart.MultipartSegment):
                        current = await _start(event, uploads, file_limit)
                        if current is not None:
                            staged.append(current)
                    elif event:
                        if current is not None:
                            await current.write(event)
                    elif current is not None:
                        await current.close()
                        current = None
                if parser.closed:
                    break
    except multipart.MultipartError as error:
        await _discard(staged)
        raise InvalidInput(f"the multipart/form-data body is malformed: {error}") from None
    except PayloadTooLarge:
        await _discard(staged)
        await _drain(body)
        raise
    except FileNotFoundError:
        # the destination directory was removed meanwhile (its knowledge base deleted)
        await _discard(staged)
        await _drain(body)
        raise NotFound("the upload's destination was deleted during the upload") from None
    except BaseException:
        await _discard(staged)
        raise
    if not staged:
        raise InvalidInput("the body has no file: send each file as a part named file")
    return staged


async def _start(segment: Any, uploads: Path, file_limit: int) -> StagedFile | None:
    if segment.name != FILE_FIELD:
        return None
    if segment.filename is None:
        raise InvalidInput("a part named file needs a filename")
    return await StagedFile.open(uploads, segment.filename, segment.content_type, limit=file_limit)


async def _discard(staged: list[StagedFile]) -> None:
    for item in staged:
        await item.discard()


async def _drain(body: Any) -> None:
    dropped = 0
    with contextlib.suppress(Exception):
        async for chunk in body:
            dropped += len(chunk)
            if dropped > DRAIN_BYTES:
                break
