"""The API through database outages: pooled connections the server killed are replaced
before a request sees them, and while the database is down every request is a 503 with
the error shape (never a 500) and health says ``database: down``."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from psycopg import AsyncConnection

from tests.api.conftest import Api, error_of, free_port, serving
from yuxi.settings import Settings

pytestmark = pytest.mark.asyncio(loop_scope="module")

KILL_ROUNDS = 5
REQUESTS_PER_ROUND = 40


async def kill_every_backend_of_the_api(api: Api) -> int:
    """pg_terminate_backend of every connection to the module's database but the one
    doing it (the API's pool, its LISTEN connection, the test's own pool)."""
    async with await AsyncConnection.connect(api.db_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def test_killed_pool_connections_never_reach_a_request(api: Api) -> None:
    thread = await api.thread()
    statuses: list[int] = []
    for _ in range(KILL_ROUNDS):
        # fill the pool with connections, then have the server kill all of them
        await asyncio.gather(*(api.alice.get("/api/chat/threads") for _ in range(10)))
        assert await kill_every_backend_of_the_api(api) > 0
        await asyncio.sleep(0.05)  # the termination reaches the sockets
        responses = await asyncio.gather(
            *(
                api.alice.post(
                    "/api/agent/runs",
                    json={
                        "thread_id": thread,
                        "query": f"q{i}",
                        "request_id": f"k-{time.monotonic_ns()}-{i}",
                    },
                )
                if i % 2
                else api.alice.get(f"/api/chat/thread/{thread}/history")
                for i in range(REQUESTS_PER_ROUND)
            )
        )
        statuses.extend(r.status_code for r in responses)
    assert [s for s in statuses if s >= 500] == [], sorted(set(statuses))
    assert set(statuses) <= {200, 202}, sorted(set(statuses))


async def test_with_the_database_down_requests_are_503_and_health_says_down(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # a server nobody listens on: the database is down for this whole API's life
    dead = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres?connect_timeout=1"
    settings = Settings(
        home=tmp_path_factory.mktemp("yuxi-down"), port=free_port(), pool_timeout_seconds=0.5
    ).validated()
    started = time.monotonic()
    async with serving(dead, settings) as base_url:
        assert time.monotonic() - started < 10  # it starts, and says the database is down
        async with httpx.AsyncClient(base_url=base_url, timeout=10) as client:
            health = (await client.get("/api/system/health")).json()
            assert health == {"status": "degraded", "database": "down", "workers": 0}
            for method, path in (
                ("GET", "/api/chat/threads"),
                ("POST", "/api/agent/runs"),
                ("GET", "/api/agents"),
            ):
                response = await client.request(
                    method, path, headers={"Authorization": "Bearer yx_whatever"}, json={}
                )
                error = error_of(response, 503, "database_unavailable")
                assert "retry" in error["message"]
                assert response.headers["retry-after"] == "1"
