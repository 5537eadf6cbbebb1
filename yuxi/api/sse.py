"""Server-Sent Events responses: each message encoded once, to bytes, and streamed.

litestar's ``ServerSentEvent`` sends its header chunks through a worker thread before the
first message (one thread hop per stream) and builds every message with a ``StringIO``;
measured in tests/bench/http_runs.py, that was a tenth of the API's CPU per run. The wire
format is the same: fields ``: comment``, ``id``, ``event``, one ``data`` line per line
of the data, ``retry``, each line ended by CRLF and the message by an empty line.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable

from litestar.response import Stream

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
SEP = "\r\n"
HEADERS = {"Cache-Control": "no-cache", "Connection": "keep-alive", "X-Accel-Buffering": "no"}


def sse_message(
    data: str | None = None,
    *,
    event: str | None = None,
    id: int | str | None = None,
    comment: str | None = None,
    retry: int | None = None,
) -> bytes:
    """One message. ``data=None`` leaves out the data field (a comment, a retry hint),
    so an EventSource dispatches nothing for it."""
    lines: list[str] = []
    if comment is not None:
        lines.extend(f": {line}" for line in _LINE_BREAK.split(comment))
    if id is not None:
        lines.append("id: " + _LINE_BREAK.sub("", str(id)))
    if event is not None:
        lines.append("event: " + _LINE_BREAK.sub("", event))
    if data is not None:
        lines.extend(f"data: {line}" for line in _LINE_BREAK.split(data))
    if retry is not None:
        lines.append(f"retry: {retry}")
    lines.append(SEP)
    return SEP.join(lines).encode()


class EventStream(Stream):
    """A ``text/event-stream`` response of the messages ``content`` yields."""

    def __init__(self, content: AsyncIterable[bytes]) -> None:
        super().__init__(content=content, media_type="text/event-stream", headers=dict(HEADERS))
