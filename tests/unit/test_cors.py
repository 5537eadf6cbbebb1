"""yuxi.api.cors.Cors at the ASGI level: what ``*`` sends (the listed-origin case runs
over HTTP in tests/browser/test_cors.py)."""

from __future__ import annotations

from typing import Any

import pytest

from yuxi.api.cors import Cors

pytestmark = pytest.mark.asyncio


async def _answer(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


async def _call(app: Cors, method: str, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": "/lg/info",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    await app(scope, None, send)  # type: ignore[arg-type]
    start = sent[0]
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}


async def test_any_origin_gets_a_star_and_never_credentials() -> None:
    app = Cors(_answer, ["*"])
    status, headers = await _call(app, "GET", {"Origin": "https://a.example", "Cookie": "x=1"})
    assert status == 200
    assert headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in headers and "vary" not in headers
    status, headers = await _call(
        app, "OPTIONS", {"Origin": "https://b.example", "Access-Control-Request-Method": "PUT"}
    )
    assert status == 204 and headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in headers
    # an OPTIONS that is not a preflight reaches the application
    assert (await _call(app, "OPTIONS", {"Origin": "https://b.example"}))[0] == 200
