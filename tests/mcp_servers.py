"""Real MCP servers for the tests: FastMCP over streamable HTTP (or SSE) on 127.0.0.1 in a
thread, and the same tools over stdio (``python -m tests.mcp_servers``).

Tools: ``echo {text}``, ``add {a, b}``, ``has_env {name}``, ``check_auth {}`` (whether
the request carried the expected ``Authorization`` header: it says yes or no, never the
header), ``hang
{seconds}`` (sleeps), ``confirm {action}`` (asks the user through elicitation).
A server built with ``slow_start`` answers nothing (not even the MCP handshake) until
it is released.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import mcp.types as mcp_types
from fastmcp import Context, FastMCP
from fastmcp.server.dependencies import get_http_headers

EXPECTED_TOKEN = "Bearer mcp-secret-7f3a9c"


def build_server(name: str = "yuxi-test") -> FastMCP:
    server = FastMCP(name)

    @server.tool
    def echo(text: str) -> str:
        """Repeats the text."""
        return f"echo:{text}"

    @server.tool
    def add(a: int, b: int) -> int:
        """Adds two integers."""
        return a + b

    @server.tool
    def check_auth() -> str:
        """Whether the request carried the expected Authorization header."""
        headers = get_http_headers(include={"authorization"})
        return "authorized" if headers.get("authorization") == EXPECTED_TOKEN else "unauthorized"

    @server.tool
    def has_env(name: str) -> str:
        """Whether the server's process has the environment variable (never its value)."""
        return "set" if name in os.environ else "unset"

    @server.tool
    def call_key(ctx: Context) -> str:
        """The idempotency key the caller sent in the call's _meta ("none" without one)."""
        meta: Any = ctx.request_context.meta if ctx.request_context is not None else None
        if meta is not None and not isinstance(meta, dict):
            meta = meta.model_dump()
        return str((meta or {}).get("io.yuxi/idempotency-key") or "none")

    @server.tool
    async def hang(seconds: float = 3600) -> str:
        """Sleeps, then answers."""
        await asyncio.sleep(seconds)
        return "woke up"

    @server.tool
    async def confirm(action: str, ctx: Context) -> Any:
        """Asks the user to confirm the action."""
        answers = ctx.input_responses
        if not answers or "answer" not in answers:
            # asks (multi-round-trip elicitation): the client calls again with the answer
            return mcp_types.InputRequiredResult(
                input_requests={
                    "answer": mcp_types.ElicitRequest(
                        params=mcp_types.ElicitRequestFormParams(
                            message=f"Really {action}?",
                            requested_schema={
                                "type": "object",
                                "properties": {"value": {"type": "string"}},
                                "required": ["value"],
                            },
                        )
                    )
                }
            )
        answer = answers["answer"]
        if getattr(answer, "action", None) != "accept":
            return f"not confirmed ({getattr(answer, 'action', None)})"
        return f"confirmed {action}: {(answer.content or {}).get('value')}"

    return server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RunningServer:
    url: str
    port: int
    release: threading.Event


@contextmanager
def http_server(
    transport: str = "streamable-http", *, slow_start: bool = False
) -> Iterator[RunningServer]:
    """A FastMCP server on 127.0.0.1 in a thread of its own (its own event loop); its
    URL ends with ``/mcp`` (``/sse`` for SSE). ``slow_start``: requests wait until
    ``release`` is set (a server that accepts connections but does not answer)."""
    import uvicorn

    port = free_port()
    path = "/sse" if transport == "sse" else "/mcp"
    app = build_server().http_app(path=path, transport=transport)
    release = threading.Event()
    if not slow_start:
        release.set()

    async def gated(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http" and not release.is_set():
            await asyncio.to_thread(release.wait)
        await app(scope, receive, send)

    config = uvicorn.Config(gated, host="127.0.0.1", port=port, log_level="critical", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the test MCP server did not start")
        time.sleep(0.02)
    try:
        yield RunningServer(f"http://127.0.0.1:{port}{path}", port, release)
    finally:
        release.set()
        server.should_exit = True
        thread.join(timeout=10)


def stdio_command() -> tuple[str, list[str]]:
    """The command and args that run these tools over stdio."""
    return sys.executable, ["-m", "tests.mcp_servers"]


if __name__ == "__main__":
    build_server("yuxi-test-stdio").run("stdio", show_banner=False)
