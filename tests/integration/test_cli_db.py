"""``yuxi db …`` as a real process: ``migrate`` seeds the built-in agents (as every start
path does), once, never overwriting one."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.conftest import database_url
from yuxi.models.secret_box import new_key

AGENT_ROW = (
    "SELECT slug, name, backend_id, config_json, description, created_at, updated_at"
    " FROM yuxi.agents ORDER BY slug"
)


@pytest.fixture
def empty_db(pg_server_url: str) -> Iterator[str]:
    """A database with nothing in it: not cloned from the migrated template."""
    name = f"yuxi_clidb_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield database_url(pg_server_url, name)
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _env(url: str, home: Path) -> dict[str, str]:
    return {**os.environ, "YUXI_DATABASE_URL": url, "YUXI_HOME": str(home)}


def _yuxi(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "yuxi.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def _rows(url: str, query: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query).fetchall()  # type: ignore[arg-type]


def test_migrate_seeds_the_built_in_agents_once_and_never_overwrites_one(
    empty_db: str, tmp_path: Path
) -> None:
    env = _env(empty_db, tmp_path)
    first = _yuxi("db", "migrate", env=env)
    assert first.returncode == 0, first.stderr
    assert "created the built-in agent chatbot" in first.stderr
    [chatbot] = _rows(empty_db, AGENT_ROW)
    assert chatbot[:3] == ("chatbot", "Chatbot", "chatbot")
    assert chatbot[3] == {"context": {"model": "builtin:scripted"}}

    again = _yuxi("db", "migrate", env=env)
    assert again.returncode == 0, again.stderr
    assert "database is up to date" in again.stdout and "created" not in again.stderr
    assert _rows(empty_db, AGENT_ROW) == [chatbot]

    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute(
            "UPDATE yuxi.agents SET name = 'My bot', config_json = '{\"context\": {}}',"
            " updated_at = now() WHERE slug = 'chatbot'"
        )
    edited = _rows(empty_db, AGENT_ROW)
    assert edited != [chatbot]
    third = _yuxi("db", "migrate", env=env)
    assert third.returncode == 0, third.stderr
    assert _rows(empty_db, AGENT_ROW) == edited


async def test_a_worker_seeds_the_built_in_agents_too(db_url: str, tmp_path: Path) -> None:
    # the test database is migrated without the CLI: no agent yet
    assert _rows(db_url, AGENT_ROW) == []
    env = {**_env(db_url, tmp_path), "YUXI_SECRET_KEY": new_key()}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "yuxi.cli", "worker", env=env, stderr=asyncio.subprocess.PIPE
    )
    assert process.stderr is not None
    seen = b""
    try:
        async with asyncio.timeout(60):
            while b"worker running" not in seen:
                line = await process.stderr.readline()
                assert line, seen.decode()
                seen += line
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 60)
    assert b"created the built-in agent chatbot" in seen
    assert [row[0] for row in _rows(db_url, AGENT_ROW)] == ["chatbot"]
