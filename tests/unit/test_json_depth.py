"""The depth check that runs before any JSON body is decoded: it counts brackets outside
strings, and reads any body in one pass (it runs on the event loop, before the caller's
token is checked)."""

from __future__ import annotations

import json
import time

import pytest

from yuxi.api.limits import MAX_JSON_DEPTH, check_json_depth, json_depth


def test_depth_counts_brackets_outside_strings() -> None:
    assert json_depth(json.dumps([[["[[[[", {"a": "]]]{{{"}]]]).encode(), 2) == 3
    assert json_depth(b'["\\"[[[[[[", 1]', 2) == 1  # an escaped quote stays in the string
    deep = b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1)
    with pytest.raises(ValueError, match=str(MAX_JSON_DEPTH)):
        check_json_depth(deep)
    check_json_depth(deep[1:-1])


@pytest.mark.parametrize(
    "body",
    [
        b'"' + b'\\"' * 100_000 + b"[" * 100,  # one string, never closed
        b'["' + b"\\" * 200_001 + b"[" * 100,  # ends in a lone backslash
        b'"a' * 100_000 + b"[" * 100,  # strings opened and closed, the last one open
    ],
    ids=["escaped quotes", "backslashes", "many strings"],
)
def test_a_body_of_unterminated_strings_is_read_in_one_pass(body: bytes) -> None:
    # scanning each later quote again was quadratic: 18 s for 80 KB of escaped quotes
    started = time.perf_counter()
    json_depth(body)
    assert time.perf_counter() - started < 1.0
