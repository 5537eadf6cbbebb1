"""The API over real HTTP: uvicorn on a free 127.0.0.1 port inside the test's event loop.

One database, one server (and, for modules that ask for it, one in-process worker) per
test module: the stack is module-scoped, so every test module runs its tests in a
module-scoped event loop (``pytestmark = pytest.mark.asyncio(loop_scope="module")``).
Tests share the users and agents seeded here and create their own threads, so they do
not see each other's queues.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import psycopg
import pytest
import pytest_asyncio
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from tests.api.log_capture import Capture, capturing
from tests.conftest import database_url
from tests.integration.worker_harness import running_worker
from yuxi.api.server import serve_api
from yuxi.queue.users import user_create
from yuxi.settings import Settings

FINAL = frozenset({"completed", "failed", "cancelled", "interrupted"})
SSE_HEARTBEAT_SECONDS = 5.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- SSE ------------------------------------------------------------------------------


@dataclass
class Sse:
    """One server-sent event; ``at`` is when the client read its last line."""

    event: str
    data: str
    id: str | None
    at: float

    @property
    def seq(self) -> int:
        assert self.id is not None, f"event {self.event} has no id"
        return int(self.id)

    def json(self) -> Any:
        return json.loads(self.data)


async def parse_sse(lines: AsyncIterator[str]) -> AsyncIterator[Sse]:
    """The events of a text/event-stream, dispatched as an EventSource would: comment
    lines are skipped, a block with a ``data:`` line (even an empty one) is an event, and
    ``id`` carries over from the last block that set it."""
    event: str | None = None
    data: list[str] = []
    last_id: str | None = None
    seen_field = False
    async for raw in lines:
        line = raw.rstrip("\r")
        if line == "":
            if seen_field and (data or event):
                yield Sse(event or "message", "\n".join(data), last_id, time.monotonic())
            event, data, seen_field = None, [], False
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        seen_field = True
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
        elif name == "id":
            last_id = value
    if seen_field and (data or event):
        yield Sse(event or "message", "\n".join(data), last_id, time.monotonic())


async def collect_sse(
    client: httpx.AsyncClient,
    run_id: str,
    sink: list[Sse],
    *,
    headers: dict[str, str] | None = None,
    params: dict[str, Any] | None = None,
) -> None:
    """Appends a run's events to ``sink`` as they arrive, until the server closes. A
    stream from the start must begin with ``init`` (id 0, the run's stored input), which
    is checked and left out of ``sink``: the rest is the run's stored log."""
    fresh = not (headers or {}).get("Last-Event-ID") and "after_seq" not in (params or {})
    async with client.stream(
        "GET", f"/api/agent/runs/{run_id}/events", headers=headers, params=params
    ) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        assert response.headers["content-type"].startswith("text/event-stream")
        first = fresh
        async for event in parse_sse(response.aiter_lines()):
            if first:
                assert_init(event, run_id)
                first = False
                continue
            assert event.event != "init", "init is sent once, first"
            sink.append(event)


def assert_init(event: Sse, run_id: str) -> None:
    """The ``init`` event a fresh stream starts with: the run's input as stored."""
    assert (event.event, event.id) == ("init", "0"), event
    body = event.json()
    assert body["run_id"] == run_id, body
    assert set(body) == {
        "run_id",
        "thread_id",
        "request_id",
        "run_type",
        "message_id",
        "query",
        "input",
    }, body


async def read_sse(
    client: httpx.AsyncClient,
    run_id: str,
    *,
    headers: dict[str, str] | None = None,
    params: dict[str, Any] | None = None,
    within: float = 20.0,
) -> list[Sse]:
    """Every event of a run's stream, read until the server closes it."""
    events: list[Sse] = []
    async with asyncio.timeout(within):
        await collect_sse(client, run_id, events, headers=headers, params=params)
    return events


# -- assertions -----------------------------------------------------------------------


def error_of(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    """Asserts an error response of the contract's shape; returns its ``error``."""
    assert response.status_code == status, (
        f"{response.request.method} {response.request.url.path}: expected {status},"
        f" got {response.status_code}: {response.text[:500]}"
    )
    body = response.json()
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message"}, error
    assert isinstance(error["code"], str) and error["code"], error
    assert isinstance(error["message"], str), error
    if code is not None:
        assert error["code"] == code, error
    return dict(error)


def client_error(response: httpx.Response) -> dict[str, Any]:
    """Any 4xx with the contract's error body (never a 500 for bad input)."""
    assert 400 <= response.status_code < 500, (
        f"{response.request.method} {response.request.url}: expected a 4xx,"
        f" got {response.status_code}: {response.text[:500]}"
    )
    return error_of(response, response.status_code)


# the fields of a request view (submit, resume, GET /api/agent/requests/{id})
REQUEST_VIEW_KEYS = {
    "request_id",
    "thread_id",
    "status",
    "queue_policy",
    "queue_position",
    "message_id",
    "run_id",
    "stream_url",
    "created_at",
}

# -- the stack ------------------------------------------------------------------------


@dataclass
class Api:
    base_url: str
    db_url: str
    home: Path
    pool: AsyncConnectionPool
    settings: Settings
    tokens: dict[str, str]
    uids: dict[str, UUID]
    clients: dict[str, httpx.AsyncClient] = field(default_factory=dict)

    @property
    def alice(self) -> httpx.AsyncClient:
        return self.clients["alice"]

    @property
    def bob(self) -> httpx.AsyncClient:
        return self.clients["bob"]

    @property
    def admin(self) -> httpx.AsyncClient:
        return self.clients["admin"]

    @property
    def anon(self) -> httpx.AsyncClient:
        return self.clients["anon"]

    def client(self, token: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=30.0)

    # data -----------------------------------------------------------------------------

    async def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(query, params)  # type: ignore[arg-type]
            return await cur.fetchall() if cur.description else []

    async def value(self, query: str, *params: Any) -> Any:
        rows = await self.sql(query, *params)
        return rows[0][0] if rows else None

    # HTTP helpers ---------------------------------------------------------------------

    async def thread(self, who: str = "alice", agent: str = "chatbot", **body: Any) -> str:
        response = await self.clients[who].post(
            "/api/chat/thread", json={"agent_id": agent, **body}
        )
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    async def submit(
        self, thread_id: str, query: str, who: str = "alice", **fields: Any
    ) -> dict[str, Any]:
        response = await self.clients[who].post(
            "/api/agent/runs", json={"thread_id": thread_id, "query": query, **fields}
        )
        assert response.status_code == 202, response.text
        return dict(response.json())

    async def run(self, run_id: str, who: str = "alice") -> dict[str, Any]:
        response = await self.clients[who].get(f"/api/agent/runs/{run_id}")
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def wait_run(
        self,
        run_id: str | None,
        statuses: frozenset[str] | set[str] = FINAL,
        within: float = 20.0,
        who: str = "alice",
    ) -> dict[str, Any]:
        """Polls the run view until its status is one of ``statuses``."""
        assert run_id is not None
        deadline = time.monotonic() + within
        while True:
            run = await self.run(run_id, who)
            if run["status"] in statuses:
                return run
            if time.monotonic() > deadline:
                raise AssertionError(f"run {run_id} still {run['status']} after {within}s")
            await asyncio.sleep(0.03)

    async def completed(self, run_id: str | None, within: float = 20.0) -> dict[str, Any]:
        run = await self.wait_run(run_id, within=within)
        assert run["status"] == "completed", run
        return run

    async def request(self, request_id: str, who: str = "alice") -> dict[str, Any]:
        response = await self.clients[who].get(f"/api/agent/requests/{request_id}")
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def wait_dispatched(
        self, request_id: str, within: float = 20.0, who: str = "alice"
    ) -> dict[str, Any]:
        deadline = time.monotonic() + within
        while True:
            view = await self.request(request_id, who)
            if view["run_id"] is not None:
                return view
            if time.monotonic() > deadline:
                raise AssertionError(f"request {request_id} still {view['status']}")
            await asyncio.sleep(0.03)

    async def result(self, run_id: str, who: str = "alice") -> dict[str, Any]:
        response = await self.clients[who].get(f"/api/agent/runs/{run_id}/result")
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def history(self, thread_id: str, who: str = "alice") -> dict[str, Any]:
        response = await self.clients[who].get(f"/api/chat/thread/{thread_id}/history")
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def queue(self, thread_id: str, who: str = "alice") -> dict[str, Any]:
        response = await self.clients[who].get(f"/api/agent/thread/{thread_id}/requests")
        assert response.status_code == 200, response.text
        return dict(response.json())


@pytest.fixture(scope="module")
def module_db_url(pg_server_url: str, template_database: str) -> Iterator[str]:
    """A fresh, migrated database for one test module."""
    name = f"yuxi_api_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_database)
            )
        )
    try:
        yield database_url(pg_server_url, name)
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


async def _seed(pool: AsyncConnectionPool) -> tuple[dict[str, str], dict[str, UUID]]:
    tokens: dict[str, str] = {}
    uids: dict[str, UUID] = {}
    async with pool.connection() as conn:
        for name, is_admin in (("alice", False), ("bob", False), ("admin", True)):
            uids[name], tokens[name] = await user_create(conn, name, is_admin=is_admin)
        await conn.execute(
            "SELECT yuxi.agent_seed('chatbot', 'Chatbot', 'chatbot',"
            ' \'{"context": {"model": "builtin:scripted"}}\')'
        )
        # visible to alice (and admins) only
        await conn.execute(
            "SELECT yuxi.agent_seed('private', 'Private', 'chatbot',"
            ' \'{"context": {"model": "builtin:scripted"}}\')'
        )
        await conn.execute("UPDATE yuxi.agents SET share_scope = 'selected' WHERE slug = 'private'")
        await conn.execute(
            "INSERT INTO yuxi.agent_shares (agent_slug, uid) VALUES ('private', %s)",
            (uids["alice"],),
        )
    return tokens, uids


@contextlib.asynccontextmanager
async def serving(url: str, settings: Settings) -> AsyncIterator[str]:
    """Serves the API until the block ends; yields its base URL once it answers."""
    task = asyncio.create_task(serve_api(url, settings))
    base_url = f"http://{settings.host}:{settings.port}"
    try:
        async with httpx.AsyncClient(base_url=base_url, timeout=2.0) as probe:
            deadline = time.monotonic() + 30
            while True:
                if task.done():
                    task.result()  # surface a startup failure
                    raise AssertionError("the API stopped during startup")
                with contextlib.suppress(httpx.TransportError):
                    if (await probe.get("/api/system/health")).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise AssertionError("the API did not answer within 30s")
                await asyncio.sleep(0.02)
        yield base_url
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(
    module_db_url: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> AsyncIterator[Api]:
    """The API served over HTTP on a database of this module, with alice, bob, admin,
    the ``chatbot`` agent (builtin:scripted) and ``private`` (shared with alice only).

    A module may set ``SSE_HEARTBEAT_SECONDS`` to change the server's heartbeat, and
    ``API_SETTINGS`` (a dict of Settings fields) to change others."""
    heartbeat = getattr(request.module, "SSE_HEARTBEAT_SECONDS", SSE_HEARTBEAT_SECONDS)
    overrides = getattr(request.module, "API_SETTINGS", {})
    home = tmp_path_factory.mktemp("yuxi-api-home")
    pool = AsyncConnectionPool(
        module_db_url, min_size=1, max_size=10, open=False, kwargs={"autocommit": True}
    )
    await pool.open()
    try:
        tokens, uids = await _seed(pool)
        settings = Settings(
            home=home,
            port=free_port(),
            pool_max_size=20,
            sse_heartbeat_seconds=heartbeat,
            **overrides,
        ).validated()
        async with serving(module_db_url, settings) as base_url:
            stack = Api(base_url, module_db_url, home, pool, settings, tokens, uids)
            for name, token in tokens.items():
                stack.clients[name] = stack.client(token)
            stack.clients["anon"] = stack.client()
            try:
                yield stack
            finally:
                for client in stack.clients.values():
                    await client.aclose()
    finally:
        await pool.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def worker(api: Api) -> AsyncIterator[None]:
    """An in-process worker executing this module's runs."""
    async with running_worker(api.db_url, api.home, worker_concurrency=8):
        yield


@pytest.fixture
def logs() -> Iterator[Capture]:
    """Every log record of this process (the API served here included) during the test."""
    with capturing() as capture:
        yield capture
