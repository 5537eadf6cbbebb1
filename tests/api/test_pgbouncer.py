"""The API's request pool through PgBouncer in transaction mode (YUXI_API_DATABASE_URL),
while LISTEN and the checkpointer keep a direct connection: submits, streams, history,
state and cancels all work, and concurrent requests share few server connections.

Needs Debian's `pgbouncer` (`apt-get install pgbouncer`) and a test server reachable over
TCP (the PostgreSQL 15 run of CI); skipped otherwise."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
import pytest_asyncio
from psycopg import conninfo

from tests.api.conftest import free_port, parse_sse, serving
from tests.integration.worker_harness import running_worker
from yuxi.queue.users import user_create
from yuxi.settings import Settings

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _tcp_server(url: str) -> dict[str, str] | None:
    params = conninfo.conninfo_to_dict(url)
    host = str(params.get("host") or "")
    if not host or host.startswith("/"):
        return None  # a Unix socket (the embedded server): PgBouncer runs as another user
    return {k: str(v) for k, v in params.items()}


@pytest.fixture(scope="module")
def bouncer(module_db_url: str) -> Iterator[str]:
    """PgBouncer in transaction mode in front of the module's database; yields its URL."""
    if shutil.which("pgbouncer") is None:
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    server = _tcp_server(module_db_url)
    if server is None:
        pytest.skip("PgBouncer is tested against a server reachable over TCP (the PG 15 run)")
    # pgbouncer refuses to run as root: it runs as nobody, which must reach its files
    home = Path(tempfile.mkdtemp(prefix="yuxi-pgbouncer-", dir="/tmp"))
    home.chmod(0o777)
    port = free_port()
    user = server.get("user", "postgres")
    (home / "users.txt").write_text(f'"{user}" ""\n')
    (home / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={server['host']} port={server.get('port', '5432')}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\n"
        "auth_type = trust\n"
        f"auth_file = {home / 'users.txt'}\n"
        "pool_mode = transaction\n"
        "default_pool_size = 4\nmax_client_conn = 200\n"
        f"unix_socket_dir =\nlogfile = {home / 'pgbouncer.log'}\n"
    )
    for name in ("users.txt", "pgbouncer.ini"):
        (home / name).chmod(0o644)
    process = subprocess.Popen(["pgbouncer", "-u", "nobody", str(home / "pgbouncer.ini")])
    url = conninfo.make_conninfo(module_db_url, host="127.0.0.1", port=str(port))
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                psycopg.connect(url, connect_timeout=1).close()
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline or process.poll() is not None:
                    log = home / "pgbouncer.log"
                    raise AssertionError(log.read_text() if log.exists() else "no log") from None
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(home, ignore_errors=True)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def through_bouncer(
    bouncer: str, module_db_url: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """The API (its pool through PgBouncer) and a worker (direct), with a user's client."""
    async with await psycopg.AsyncConnection.connect(module_db_url, autocommit=True) as conn:
        _uid, token = await user_create(conn, "pat")
        await conn.execute(
            "SELECT yuxi.agent_seed('chatbot', 'Chatbot', 'chatbot',"
            ' \'{"context": {"model": "builtin:scripted"}}\')'
        )
    home = tmp_path_factory.mktemp("yuxi-bouncer")
    settings = Settings(home=home, port=free_port(), api_database_url=bouncer).validated()
    async with (
        serving(module_db_url, settings) as base_url,
        running_worker(module_db_url, home, worker_concurrency=4),
        httpx.AsyncClient(
            base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        ) as client,
    ):
        yield client, module_db_url


async def test_the_api_works_through_a_transaction_pooler(
    through_bouncer: tuple[httpx.AsyncClient, str],
) -> None:
    client, _url = through_bouncer
    thread = (await client.post("/api/chat/thread", json={"agent_id": "chatbot"})).json()["id"]
    # more than psycopg's prepare threshold of the same statements, concurrently
    infos = []
    for i in range(12):
        response = await client.post(
            "/api/agent/runs", json={"thread_id": thread, "query": f"hello {i}"}
        )
        assert response.status_code == 202, response.text
        infos.append(response.json())
    # the last one is queued behind the others: follow its request until it ends
    async with (
        asyncio.timeout(60),
        client.stream("GET", f"/api/agent/requests/{infos[-1]['request_id']}/events") as stream,
    ):
        names = [event.event async for event in parse_sse(stream.aiter_lines())]
    assert names[-1] == "end", names
    history = (await client.get(f"/api/chat/thread/{thread}/history")).json()
    replies = [m["content"] for m in history["history"] if m["role"] == "assistant"]
    assert replies == [f"echo: hello {i}" for i in range(12)]
    state = await client.get(f"/api/chat/thread/{thread}/state")
    assert state.status_code == 200, state.text
    statuses = await asyncio.gather(*(client.get("/api/chat/threads") for _ in range(40)))
    assert {r.status_code for r in statuses} == {200}
    busy = (await client.post("/api/chat/thread", json={"agent_id": "chatbot"})).json()["id"]
    run = (
        await client.post("/api/agent/runs", json={"thread_id": busy, "query": "/sleep 30"})
    ).json()
    cancelled = await client.post(f"/api/agent/runs/{run['run_id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] in ("cancelled", "cancel_requested")
