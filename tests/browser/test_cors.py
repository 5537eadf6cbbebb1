"""CORS (``YUXI_CORS_ORIGINS``): a page on another origin streams a run through /lg in
Chromium when the API lists that origin, and its fetch fails when the API was started
without the setting; the headers themselves are checked over HTTP (no browser needed).

The page (cors_page.html) is served by a tiny HTTP server on its own port: another
origin than the API's.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.api.conftest import Api, free_port, serving
from yuxi.api.cors import ALLOW_HEADERS, ALLOW_METHODS
from yuxi.settings import Settings

pytestmark = pytest.mark.asyncio(loop_scope="module")

PAGE = (Path(__file__).parent / "cors_page.html").read_bytes()
PAGE_PORT = free_port()
ORIGIN = f"http://127.0.0.1:{PAGE_PORT}"
OTHER = f"http://localhost:{PAGE_PORT}"  # the same page under a name the API does not list
API_SETTINGS = {"cors_origins": (ORIGIN,)}
# what a LangGraph client's preflight asks for (the JS SDK, agent-chat-ui)
ASKED = "content-type,last-event-id,x-api-key,x-auth-scheme,authorization"


async def _serve_page(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n"
        + f"content-length: {len(PAGE)}\r\nconnection: close\r\n\r\n".encode()
        + PAGE
    )
    await writer.drain()
    writer.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def page_server() -> AsyncIterator[str]:
    server = await asyncio.start_server(_serve_page, "127.0.0.1", PAGE_PORT)
    try:
        yield ORIGIN
    finally:
        server.close()


def cors_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.startswith("access-control-")}


# -- over HTTP ------------------------------------------------------------------------


async def test_a_listed_origin_gets_preflights_streams_and_errors_with_cors(
    api: Api, worker: None
) -> None:
    # answered whatever the path: a browser asks before it learns whether a route exists
    preflight = await api.anon.options(
        "/lg/threads/x/runs/stream",
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": ASKED,
        },
    )
    assert preflight.status_code == 204, preflight.text
    assert preflight.headers["access-control-allow-origin"] == ORIGIN
    assert "Origin" in preflight.headers.get_list("vary")
    methods = preflight.headers["access-control-allow-methods"].split(", ")
    assert set(ALLOW_METHODS) == {"GET", "POST", "PUT", "PATCH", "DELETE"} <= set(methods)
    allowed = set(preflight.headers["access-control-allow-headers"].split(", "))
    assert set(ASKED.split(",")) <= allowed == set(ALLOW_HEADERS)
    assert "access-control-allow-credentials" not in preflight.headers

    origin = {"Origin": ORIGIN, "x-api-key": api.tokens["alice"]}
    thread = await api.anon.post("/lg/threads", json={}, headers=origin)
    assert thread.status_code == 200, thread.text
    assert thread.headers["access-control-allow-origin"] == ORIGIN
    # the SSE stream carries them, and exposes where the run is
    tid = thread.json()["thread_id"]
    said = {"messages": [{"role": "user", "content": "x"}]}
    async with api.anon.stream(
        "POST",
        f"/lg/threads/{tid}/runs/stream",
        json={"assistant_id": "chatbot", "input": said, "stream_resumable": True},
        headers=origin,
    ) as stream:
        assert stream.status_code == 200
        assert stream.headers["access-control-allow-origin"] == ORIGIN
        exposed = stream.headers["access-control-expose-headers"].split(", ")
        assert {"Location", "Content-Location"} <= set(exposed)
        run_url = stream.headers["content-location"]
        assert re.fullmatch(rf"(/lg)?/threads/{tid}/runs/[0-9a-f-]{{36}}", run_url), run_url
        assert stream.headers["location"] == run_url + "/stream"
        await stream.aread()
    # an error, on /api as on /lg: the browser may read it
    refused = await api.anon.get("/api/chat/threads", headers={"Origin": ORIGIN})
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == ORIGIN


async def test_an_origin_not_listed_gets_no_cors_header(api: Api) -> None:
    preflight = await api.anon.options(
        "/lg/threads",
        headers={"Origin": OTHER, "Access-Control-Request-Method": "POST"},
    )
    assert cors_headers(preflight) == {}
    answer = await api.anon.get("/lg/info", headers={"Origin": OTHER})
    assert answer.status_code == 200 and cors_headers(answer) == {}
    # and a request without an Origin (not a browser's cross-origin call) gets none
    assert cors_headers(await api.anon.get("/lg/info")) == {}


# -- in Chromium ----------------------------------------------------------------------


async def _open(browser: Any, api_url: str, token: str) -> tuple[Any, Any]:
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(f"{ORIGIN}/#{api_url}|{token}")
    return context, page


async def test_a_page_on_a_listed_origin_streams_a_run(
    browser: Any, api: Api, worker: None, page_server: str
) -> None:
    from playwright.async_api import expect

    context, page = await _open(browser, f"{api.base_url}/lg", api.tokens["alice"])
    try:
        await expect(page.locator("#out")).to_have_text("echo: hello", timeout=15000)
        assert await page.locator("#error").text_content() == ""
        # the exposed headers reach the page's script
        where = (await page.locator("#location").text_content() or "").split(" ")
        assert "/threads/" in where[0] and where[1] == where[0] + "/stream", where
    finally:
        await context.close()


async def test_a_page_is_refused_by_an_api_started_without_cors(
    browser: Any, api: Api, page_server: str
) -> None:
    from playwright.async_api import expect

    settings = Settings(home=api.home, port=free_port()).validated()
    assert settings.cors_origins == ()
    threads = await api.value("SELECT count(*) FROM yuxi.lg_threads")
    async with serving(api.db_url, settings) as base_url:
        context, page = await _open(browser, f"{base_url}/lg", api.tokens["alice"])
        try:
            await expect(page.locator("#error")).to_have_text(
                "TypeError: Failed to fetch", timeout=15000
            )
            assert await page.locator("#out").text_content() == ""
        finally:
            await context.close()
    # nothing got through: the preflight failed before the thread was created
    assert await api.value("SELECT count(*) FROM yuxi.lg_threads") == threads
