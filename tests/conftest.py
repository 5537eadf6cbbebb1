"""Test databases.

One PostgreSQL per test session: the embedded server in a temporary directory, or the
server at YUXI_TEST_DATABASE_URL. A template database is migrated once; every test that
touches data gets its own database cloned from it, dropped afterwards.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import conninfo, sql
from psycopg_pool import AsyncConnectionPool

from yuxi.db.embedded import start_embedded
from yuxi.db.migrations import migrate

_counter = itertools.count()


def database_url(server_url: str, name: str) -> str:
    return conninfo.make_conninfo(server_url, dbname=name)


def _admin(server_url: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(server_url, autocommit=True)


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """A PostgreSQL server for the whole session (embedded unless configured)."""
    configured = os.environ.get("YUXI_TEST_DATABASE_URL")
    if configured:
        yield configured
        return
    with tempfile.TemporaryDirectory(prefix="yuxi-test-") as home:
        server = start_embedded(Path(home) / "pgdata", delete_on_exit=True)
        try:
            yield str(server.get_uri())
        finally:
            server.cleanup()


@pytest.fixture(scope="session")
def template_database(pg_server_url: str) -> Iterator[str]:
    """A migrated database that every test database is cloned from."""
    name = f"yuxi_tpl_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with _admin(pg_server_url) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        migrate(database_url(pg_server_url, name))
        yield name
    finally:
        with _admin(pg_server_url) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
def db_url(pg_server_url: str, template_database: str) -> Iterator[str]:
    """A fresh, migrated database for one test."""
    name = f"yuxi_t_{os.getpid()}_{next(_counter)}_{uuid.uuid4().hex[:6]}"
    with _admin(pg_server_url) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_database)
            )
        )
    try:
        yield database_url(pg_server_url, name)
    finally:
        with _admin(pg_server_url) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
async def pool(db_url: str) -> AsyncIterator[AsyncConnectionPool]:
    """An autocommit pool on the test database: each call is its own transaction."""
    connection_pool = AsyncConnectionPool(
        db_url, min_size=1, max_size=40, open=False, kwargs={"autocommit": True}
    )
    await connection_pool.open()
    try:
        yield connection_pool
    finally:
        await connection_pool.close()
