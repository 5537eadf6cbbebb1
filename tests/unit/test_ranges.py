"""Byte ranges of files/content (yuxi/api/ranges.py), without a server."""

from __future__ import annotations

import pytest

from yuxi.api.ranges import ByteRange, Unsatisfiable, byte_range

ETAG = '"abc"'


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bytes=0-0", (0, 1)),
        ("bytes=0-99", (0, 100)),
        ("bytes=10-", (10, 100)),
        ("bytes=90-1000", (90, 100)),
        ("bytes=-10", (90, 100)),
        ("bytes=-1000", (0, 100)),
        ("bytes = 5 - 9", (5, 10)),
        ("bytes=99-99", (99, 100)),
    ],
)
def test_single_ranges(header: str, expected: tuple[int, int]) -> None:
    found = byte_range(header, 100, etag=ETAG)
    assert found == ByteRange(expected[0], expected[1], 100)
    assert found.content_range == f"bytes {expected[0]}-{expected[1] - 1}/100"
    assert found.length == expected[1] - expected[0]


@pytest.mark.parametrize(
    "header", [None, "bytes=5-2", "bytes=0-1,5-6", "items=0-1", "bytes=x-", "bytes=-", "0-1", ""]
)
def test_what_is_not_a_single_range_is_the_whole_file(header: str | None) -> None:
    assert byte_range(header, 100, etag=ETAG) is None


@pytest.mark.parametrize(("header", "size"), [("bytes=100-", 100), ("bytes=-0", 100),
                                               ("bytes=0-", 0), ("bytes=-5", 0)])  # fmt: skip
def test_unsatisfiable(header: str, size: int) -> None:
    with pytest.raises(Unsatisfiable) as refused:
        byte_range(header, size, etag=ETAG)
    assert refused.value.content_range == f"bytes */{size}"


def test_if_range_other_than_the_etag_is_the_whole_file() -> None:
    assert byte_range("bytes=0-9", 100, etag=ETAG, if_range=ETAG) == ByteRange(0, 10, 100)
    assert byte_range("bytes=0-9", 100, etag=ETAG, if_range='"old"') is None
    assert byte_range("bytes=0-9", 100, etag=ETAG, if_range="Wed, 21 Oct 2015 07:28:00 GMT") is None
