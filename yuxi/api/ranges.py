"""HTTP byte ranges (RFC 9110 §14) for files served from the store: one range a
request, ``bytes=a-b``, ``a-`` or ``-n``.

A header the server does not serve as a range (another unit, several ranges, a
malformed one, an ``If-Range`` that does not match the file's ETag) is ignored: the
answer is the whole file, as the RFC allows. A range that starts past the end, or a
suffix of zero bytes, is unsatisfiable (416).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SPEC = re.compile(r"bytes[ \t]*=[ \t]*(\d*)[ \t]*-[ \t]*(\d*)[ \t]*")


@dataclass(frozen=True)
class ByteRange:
    """Bytes ``start`` to ``end`` (exclusive) of a file of ``size`` bytes."""

    start: int
    end: int
    size: int

    @property
    def length(self) -> int:
        return self.end - self.start

    @property
    def content_range(self) -> str:
        return f"bytes {self.start}-{self.end - 1}/{self.size}"


class Unsatisfiable(Exception):
    """No byte of the file is in the range asked for (416, ``Content-Range: bytes */size``)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"the range asked for is not within the file's {size} bytes")
        self.size = size

    @property
    def content_range(self) -> str:
        return f"bytes */{self.size}"


def byte_range(
    header: str | None, size: int, *, etag: str, if_range: str | None = None
) -> ByteRange | None:
    """The range of a file of ``size`` bytes a ``Range`` header asks for; None for the
    whole file. Raises Unsatisfiable."""
    if header is None:
        return None
    if if_range is not None and if_range.strip() != etag:
        return None  # the client's copy is of other bytes (or dated): send them all
    match = _SPEC.fullmatch(header.strip())
    if match is None:
        return None  # another unit, several ranges, or not a range at all
    first, last = match.group(1), match.group(2)
    if first:
        start = int(first)
        if last:
            end = int(last) + 1
            if end <= start:
                return None  # a-b with b < a is invalid, hence ignored
        else:
            end = size
        if start >= size:
            raise Unsatisfiable(size)
        return ByteRange(start, min(end, size), size)
    if not last:
        return None  # "bytes=-"
    suffix = int(last)
    if suffix == 0 or size == 0:
        raise Unsatisfiable(size)
    return ByteRange(max(size - suffix, 0), size, size)
