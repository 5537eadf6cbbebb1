"""A rolling restart with no downtime, as docs/deployment.md describes it: two `yuxi api`
processes on one database (a home each, one server key) behind a reverse proxy, and a
`yuxi worker`. While streaming clients follow runs through the proxy and a loop sends
plain requests, API 1 and then API 2 get SIGTERM, exit, start again and become healthy.
No request fails, and every client sees every event of each of its runs exactly once,
in order (it resumes a cut stream with ``Last-Event-ID``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import World
from tests.integration.hosts import Hosts
from tests.mcp_servers import free_port
from yuxi.queue.users import token_create

pytestmark = pytest.mark.slow

STREAMING_CLIENTS = 4
QUERIES = (
    "/sleep 1",
    "one two three four five six seven",
    '/tool calculator {"expression": "6*7"}',
)
# headers of one hop (RFC 9110 §7.6.1), and those the proxy sets itself
NOT_FORWARDED = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
    "content-length",
}
IDEMPOTENT = {"GET", "HEAD", "OPTIONS", "PUT", "DELETE"}


class Proxy:
    """A round-robin reverse proxy: each request goes to the next backend on a new
    connection, and a backend that refuses it is skipped for the next. Like nginx's
    default (``proxy_next_upstream error``), an idempotent request whose backend closes
    the connection before answering is tried on the next backend too; any other request
    it could not pass on is answered 502. Responses are streamed as they come, each on
    a connection of its own that closes after it."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.turn = 0
        self.skipped = 0  # backends tried that refused or dropped the request
        self.dropped: list[str] = []  # requests a backend took and dropped, and 502s
        self.streams = dict.fromkeys(ports, 0)  # event streams being relayed, by backend
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(10, read=None),
            limits=httpx.Limits(max_keepalive_connections=0),
        )
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        await self.client.aclose()

    async def streaming_from(self, port: int, count: int) -> None:
        """Returns once ``count`` event streams are being relayed from ``port``."""
        deadline = time.monotonic() + 20
        while self.streams[port] < count:
            assert time.monotonic() < deadline, f"fewer than {count} streams on {port}"
            await asyncio.sleep(0.02)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await _read_request(reader)
            if request is not None:
                await self._forward(*request, writer)
        except (ConnectionError, httpx.HTTPError):
            pass  # the client or the backend went away mid-response: the client sees a cut
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _forward(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.turn += 1
        first = self.turn
        for step in range(len(self.ports)):
            port = self.ports[(first + step) % len(self.ports)]
            request = self.client.build_request(
                method, f"http://127.0.0.1:{port}{target}", headers=headers, content=body
            )
            try:
                response = await self.client.send(request, stream=True)
            except httpx.ConnectError:
                self.skipped += 1
                continue
            except (httpx.RemoteProtocolError, httpx.ReadError) as error:
                self.dropped.append(f"{method} {target} by {port}: {error!r}")
                if method not in IDEMPOTENT:
                    break
                self.skipped += 1
                continue
            stream = target.split("?")[0].endswith("/events")
            self.streams[port] += stream
            try:
                await _relay(response, writer)
            finally:
                self.streams[port] -= stream
                await response.aclose()
            return
        self.dropped.append(f"{method} {target}: 502")
        writer.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await writer.drain()


async def _read_request(
    reader: asyncio.StreamReader,
) -> tuple[str, str, list[tuple[str, str]], bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None  # closed without a request
    request_line, *lines = head.decode("latin-1").split("\r\n")
    method, target, _version = request_line.split(" ", 2)
    fields = [tuple(part.strip() for part in line.split(":", 1)) for line in lines if line]
    length = next((int(value) for name, value in fields if name.lower() == "content-length"), 0)
    body = await reader.readexactly(length) if length else b""
    headers = [(name, value) for name, value in fields if name.lower() not in NOT_FORWARDED]
    return method, target, headers, body


async def _relay(response: httpx.Response, writer: asyncio.StreamWriter) -> None:
    head = [f"HTTP/1.1 {response.status_code} {response.reason_phrase}"]
    for name, value in response.headers.multi_items():
        if name.lower() not in NOT_FORWARDED - {"content-length"}:
            head.append(f"{name}: {value}")
    head.append("connection: close")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
    await writer.drain()
    async for chunk in response.aiter_raw():
        writer.write(chunk)
        await writer.drain()


@dataclass
class Traffic:
    """What the clients saw."""

    failures: list[str] = field(default_factory=list)
    runs: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    plain: int = 0  # plain requests answered
    reconnects: int = 0  # streams cut and opened again
    resumed: int = 0  # of them, with a Last-Event-ID


@dataclass
class Message:
    id: str | None = None
    event: str | None = None
    retry: int | None = None


async def _messages(response: httpx.Response) -> AsyncIterator[Message]:
    message = Message()
    async for line in response.aiter_lines():
        if line == "":
            yield message
            message = Message()
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id":
            message.id = value
        elif name == "event":
            message.event = value
        elif name == "retry":
            message.retry = int(value)


async def follow(client: httpx.AsyncClient, run_id: str, traffic: Traffic) -> None:
    """The run's events until its ``end``, through as many connections as it takes."""
    seen = traffic.runs.setdefault(run_id, [])
    last: int | None = None
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        headers = {} if last is None else {"Last-Event-ID": str(last)}
        delay = 0.5
        try:
            async with client.stream(
                "GET", f"/api/agent/runs/{run_id}/events", headers=headers
            ) as response:
                if response.status_code != 200:
                    traffic.failures.append(f"stream of {run_id}: {response.status_code}")
                    return
                with contextlib.suppress(httpx.TransportError):  # cut: resume below
                    async for message in _messages(response):
                        if message.retry is not None:
                            delay = message.retry / 1000
                        if message.id is None or message.event in (None, "init"):
                            continue
                        last = int(message.id)
                        seen.append((last, message.event))
                        if message.event == "end":
                            return
        except httpx.TransportError as error:
            traffic.failures.append(f"stream of {run_id}: {error!r}")
            return
        traffic.reconnects += 1
        traffic.resumed += last is not None
        await asyncio.sleep(delay)
    traffic.failures.append(f"stream of {run_id}: no end within 40 s")


async def streaming_client(
    client: httpx.AsyncClient, number: int, traffic: Traffic, done: asyncio.Event
) -> None:
    """Runs on a thread of its own, one after another, each followed to its end."""
    created = await client.post("/api/chat/thread", json={"agent_id": "chatbot"})
    if created.status_code != 201:
        traffic.failures.append(f"client {number}: thread {created.status_code}")
        return
    thread = created.json()["id"]
    turn = 0
    while not done.is_set():
        query = QUERIES[(number + turn) % len(QUERIES)]
        turn += 1
        submitted = await _request(
            client,
            traffic,
            "POST",
            "/api/agent/runs",
            json={"thread_id": thread, "query": query, "request_id": str(uuid.uuid4())},
        )
        if submitted is None or submitted.status_code != 202:
            return
        await follow(client, submitted.json()["run_id"], traffic)


async def _request(
    client: httpx.AsyncClient, traffic: Traffic, method: str, path: str, **kwargs: object
) -> httpx.Response | None:
    try:
        response = await client.request(method, path, **kwargs)  # type: ignore[arg-type]
    except httpx.TransportError as error:
        traffic.failures.append(f"{method} {path}: {error!r}")
        return None
    if response.status_code >= 400:
        traffic.failures.append(f"{method} {path}: {response.status_code} {response.text}")
    return response


async def plain_requests(client: httpx.AsyncClient, traffic: Traffic, done: asyncio.Event) -> None:
    """Reads and writes of every kind, one after another, as fast as they are answered."""
    while not done.is_set():
        for method, path, body in (
            ("GET", "/api/system/health", None),
            ("GET", "/api/chat/threads", None),
            ("GET", "/api/agents/chatbot", None),
            ("POST", "/api/projects", {"name": f"p-{uuid.uuid4().hex[:8]}"}),
        ):
            if await _request(client, traffic, method, path, json=body) is not None:
                traffic.plain += 1


async def healthy(port: int, hosts: Hosts, name: str) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as probe:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.TransportError):
                if (await probe.get("/api/system/health")).status_code == 200:
                    return
            assert time.monotonic() < deadline, hosts.log(name)
            await asyncio.sleep(0.05)


async def test_a_rolling_restart_of_two_apis_loses_nothing(
    world: World, db_url: str, tmp_path: Path
) -> None:
    async with world.pool.connection() as conn:
        token = await token_create(conn, world.alice)
    hosts = Hosts(db_url, tmp_path)
    ports = {"api1": free_port(), "api2": free_port()}
    proxy = Proxy(list(ports.values()))
    try:
        for name, port in ports.items():
            await hosts.start(name, "api", port)
        await hosts.start("worker", "worker", YUXI_WORKER_CONCURRENCY=str(STREAMING_CLIENTS))
        for name, port in ports.items():
            await healthy(port, hosts, name)
        proxy_port = await proxy.start()
        traffic = Traffic()
        done = asyncio.Event()
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{proxy_port}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(20, read=30),
        ) as client:
            clients = [
                asyncio.create_task(streaming_client(client, number, traffic, done))
                for number in range(STREAMING_CLIENTS)
            ]
            clients.append(asyncio.create_task(plain_requests(client, traffic, done)))
            for name, port in ports.items():
                # streams open on the API that stops, past their run's first events
                await proxy.streaming_from(port, 2)
                await asyncio.sleep(0.5)
                assert await hosts.stop(name) == 0, hosts.log(name)
                await hosts.start(name, "api", port)
                await healthy(port, hosts, name)
            await asyncio.sleep(1.5)
            done.set()
            await asyncio.wait_for(asyncio.gather(*clients), 60)
    finally:
        await proxy.stop()
        await hosts.stop_all()

    assert traffic.failures == [], "\n".join([*proxy.dropped, *traffic.failures])[:4000]
    # the restarts were felt: refused connections went to the other API, streams were
    # cut, and some were cut between two events of a run
    assert proxy.skipped > 0
    assert traffic.reconnects > 0 and traffic.resumed > 0, traffic
    assert traffic.plain > 20 and len(traffic.runs) >= STREAMING_CLIENTS * 2, traffic
    # the worker took jobs before its agent stack had loaded, and said when it had
    assert "worker: ready to execute runs" in hosts.log("worker")
    for run_id, seen in traffic.runs.items():
        stored = await world.fetch(
            "SELECT seq, event FROM yuxi.run_events WHERE run_id = %s ORDER BY seq", run_id
        )
        assert seen == [(seq, event) for seq, event in stored], run_id
        assert seen[-1][1] == "end" and [event for _, event in seen].count("end") == 1
