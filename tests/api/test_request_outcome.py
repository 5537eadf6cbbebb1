"""Honest accounting of requests that end without the application's response reaching
anyone, against `yuxi api` as its own process, over raw sockets: a client that sends
part of its body and leaves is logged and counted ``499`` (litestar answers it 500 into
the closed connection: that answer is not counted), a malformed chunked body uvicorn
answers 400 itself is logged and counted 400, and a stream its client leaves keeps the
200 it was sent. The access line is read from the server's log, the count from its
/metrics; nothing of it is a 500 or a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
import pytest_asyncio

from tests.api.conftest import free_port
from yuxi.models.secret_box import new_key
from yuxi.queue.users import new_token, token_hash

pytestmark = pytest.mark.asyncio(loop_scope="module")

FIELD = re.compile(r"(\w+)=(\S+)")


@dataclass
class Server:
    """`yuxi api` in a process of its own, and what it logs."""

    host: str
    port: int
    token: str
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def access(self, method: str, path: str) -> list[dict[str, str]]:
        lines = [line for line in self.text().splitlines() if " yuxi.api.access: " in line]
        fields = [dict(FIELD.findall(line.partition(" yuxi.api.access: ")[2])) for line in lines]
        return [f for f in fields if f.get("method") == method and f.get("path") == path]

    async def logged(self, method: str, path: str, within: float = 10.0) -> dict[str, str]:
        """The one access line of ``method path`` (written once the request is over)."""
        deadline = time.monotonic() + within
        while not (lines := self.access(method, path)):
            assert time.monotonic() < deadline, f"no access line for {method} {path}"
            await asyncio.sleep(0.02)
        assert len(lines) == 1, lines
        return lines[0]

    async def counted(self, method: str, route: str) -> dict[str, float]:
        """``yuxi_http_requests_total`` of ``method route`` by status, from /metrics."""
        async with httpx.AsyncClient(base_url=self.base_url) as client:
            text = (await client.get("/metrics")).text
        counts: dict[str, float] = {}
        for line in text.splitlines():
            if not line.startswith("yuxi_http_requests_total{"):
                continue
            series, _, value = line.rpartition("} ")
            labels = dict(re.findall(r'(\w+)="([^"]*)"', series))
            if labels["method"] == method and labels["route"] == route:
                counts[labels["status"]] = float(value)
        return counts

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(self.host, self.port)

    def head(self, method: str, path: str, *lines: str) -> bytes:
        header = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        header += [f"Authorization: Bearer {self.token}", *lines]
        return ("\r\n".join(header) + "\r\n\r\n").encode()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(
    module_db_url: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Server]:
    home = tmp_path_factory.mktemp("yuxi-outcome")
    token = new_token()
    with psycopg.connect(module_db_url, autocommit=True) as conn:
        conn.execute(
            "SELECT yuxi.user_create(p_name => 'outcome', p_is_admin => false, p_token_hash => %s)",
            (token_hash(token),),
        )
    port = free_port()
    env = {
        **os.environ,
        "YUXI_DATABASE_URL": module_db_url,
        "YUXI_HOME": str(home),
        "YUXI_PORT": str(port),
        "YUXI_SECRET_KEY": new_key(),
        "YUXI_LOG_LEVEL": "INFO",
        "YUXI_SSE_HEARTBEAT_SECONDS": "0.2",
    }
    log = home / "api.log"
    with log.open("ab") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "yuxi.cli", "api", env=env, stdout=out, stderr=out
        )
    running = Server("127.0.0.1", port, token, log)
    try:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=5) as client:
            deadline = time.monotonic() + 60
            while True:
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get("/api/system/health")).status_code == 200:
                        break
                assert process.returncode is None, running.text()
                assert time.monotonic() < deadline, running.text()
                await asyncio.sleep(0.1)
        yield running
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 60)
    assert "Traceback" not in running.text(), running.text()


async def test_a_client_that_leaves_mid_body_is_499(server: Server) -> None:
    _reader, writer = await server.connect()
    writer.write(
        server.head(
            "POST", "/api/agent/runs", "Content-Type: application/json", "Content-Length: 1000"
        )
        + b'{"thread_id": "'
    )
    await writer.drain()
    await asyncio.sleep(0.3)  # the application is reading the body
    writer.close()
    await writer.wait_closed()
    line = await server.logged("POST", "/api/agent/runs")
    assert (line["status"], line["bytes"]) == ("499", "0"), line
    assert line["user"] == "-"  # the body was never whole: nobody was authenticated
    assert await server.counted("POST", "/api/agent/runs") == {"499": 1.0}


async def test_a_client_that_leaves_before_any_body_is_499(server: Server) -> None:
    thread = str(uuid.uuid4())
    path = f"/api/chat/thread/{thread}"
    _reader, writer = await server.connect()
    writer.write(server.head("PATCH", path, "Content-Type: application/json", "Content-Length: 20"))
    await writer.drain()
    await asyncio.sleep(0.3)
    writer.close()
    await writer.wait_closed()
    line = await server.logged("PATCH", path)
    assert (line["status"], line["bytes"]) == ("499", "0"), line
    assert await server.counted("PATCH", "/api/chat/thread/{thread_id}") == {"499": 1.0}


@pytest.mark.parametrize(
    ("pause", "path", "route"),
    [
        (True, "/api/projects", "/api/projects"),
        (False, "/api/chat/thread", "/api/chat/thread"),
    ],
    ids=["mid-body", "with the headers"],
)
async def test_a_malformed_chunked_body_is_the_400_uvicorn_sent(
    server: Server, pause: bool, path: str, route: str
) -> None:
    reader, writer = await server.connect()
    writer.write(
        server.head("POST", path, "Content-Type: application/json", "Transfer-Encoding: chunked")
        + b'5\r\n{"nam\r\n'
    )
    if pause:
        await writer.drain()
        await asyncio.sleep(0.3)  # the application is waiting for the rest
    writer.write(b"zz-not-a-chunk-size\r\n\r\n")
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 400 "), answer
    assert b"Invalid HTTP request received." in answer
    line = await server.logged("POST", path)
    assert (line["status"], line["bytes"]) == ("400", "0"), line
    assert await server.counted("POST", route) == {"400": 1.0}


async def test_a_stream_its_client_leaves_keeps_its_200(server: Server) -> None:
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"Authorization": f"Bearer {server.token}"}
    ) as client:
        # `yuxi api` seeds the chatbot agent as it starts
        created = await client.post("/api/chat/thread", json={"agent_id": "chatbot"})
        assert created.status_code == 201, created.text
        thread = created.json()["id"]
        submitted = await client.post(
            "/api/agent/runs", json={"thread_id": thread, "query": "pending: no worker here"}
        )
        assert submitted.status_code == 202, submitted.text
    run = submitted.json()["run_id"]
    path = f"/api/agent/runs/{run}/events"
    reader, writer = await server.connect()
    writer.write(server.head("GET", path, "Accept: text/event-stream"))
    await writer.drain()
    status = await asyncio.wait_for(reader.readline(), 10)
    assert status.startswith(b"HTTP/1.1 200 "), status
    writer.close()
    await writer.wait_closed()
    line = await server.logged("GET", path)  # when the next heartbeat finds nobody
    assert line["status"] == "200" and int(line["bytes"]) > 0, line
    counts = await server.counted("GET", "/api/agent/runs/{run_id}/events")
    assert counts == {"200": 1.0}, counts
