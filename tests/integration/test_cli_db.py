"""``yuxi db …`` as a real process: ``migrate`` seeds the built-in agents (as every start
path does), once, never overwriting one; ``dump`` and ``restore`` carry the whole state
(LangGraph's store and the agents' versions included) into another database, a restore
refuses a database that holds yuxi's state without ``--force``, an older dump is
migrated, and a failed dump leaves no file."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from tests.integration.conftest import World
from yuxi.db.migrations import migrate
from yuxi.db.paths import migrations_dir
from yuxi.models.secret_box import new_key

AGENT_ROW = (
    "SELECT slug, name, backend_id, config_json, description, created_at, updated_at"
    " FROM yuxi.agents ORDER BY slug"
)


@pytest.fixture
def empty_db(new_database: Callable[[], str]) -> str:
    return new_database()


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


STATE = {
    "users": "SELECT id, name, is_admin, created_at FROM yuxi.users ORDER BY name",
    "agents": AGENT_ROW,
    "messages": "SELECT thread_id, role, content, created_at FROM yuxi.messages"
    " ORDER BY created_at, id",
    "runs": "SELECT run_id, status FROM yuxi.agent_runs ORDER BY run_id",
    "store": "SELECT prefix, key, value, created_at FROM public.store ORDER BY prefix, key",
    "versions": "SELECT agent_slug, version, config_json FROM yuxi.agent_versions"
    " ORDER BY agent_slug, version",
}


def _state(url: str) -> dict[str, list[tuple[object, ...]]]:
    return {what: _rows(url, query) for what, query in STATE.items()}


async def test_dump_and_restore_carry_users_agents_and_messages(
    world: World, db_url: str, new_database: Callable[[], str], tmp_path: Path
) -> None:
    thread = await world.thread()
    submitted = await world.submit(thread, "remember this")
    assert submitted.run_id is not None
    await world.complete(await world.claim(submitted.run_id), "remembered")
    with psycopg.connect(db_url, autocommit=True) as conn:  # an item of LangGraph's store
        conn.execute(
            "INSERT INTO public.store (prefix, key, value)"
            """ VALUES ('users.u.notes', 'kept', '{"text": "remember"}')"""
        )
    before = _state(db_url)
    assert [row[:3] for row in before["store"]] == [("users.u.notes", "kept", {"text": "remember"})]
    assert [m[1:3] for m in before["messages"]] == [
        ("user", "remember this"),
        ("assistant", "remembered"),
    ]
    assert {u[1] for u in before["users"]} == {"alice", "bob", "admin"}

    dumped = tmp_path / "backups" / "yuxi.dump"
    dumped.parent.mkdir()
    made = _yuxi("db", "dump", str(dumped), env=_env(db_url, tmp_path))
    assert made.returncode == 0, made.stderr
    assert "dumping database" in made.stderr and f"wrote {dumped} (" in made.stderr
    assert dumped.read_bytes()[:5] == b"PGDMP"
    assert [p.name for p in dumped.parent.iterdir()] == ["yuxi.dump"]

    target = new_database()
    restored = _yuxi("db", "restore", str(dumped), env=_env(target, tmp_path))
    assert restored.returncode == 0, restored.stderr
    assert "restoring" in restored.stderr and "the schema is up to date" in restored.stderr
    assert _state(target) == before

    # the database holds yuxi's state now: refused without --force, and left as it is
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("UPDATE yuxi.users SET name = 'renamed' WHERE name = 'bob'")
    changed = _state(target)
    refused = _yuxi("db", "restore", str(dumped), env=_env(target, tmp_path))
    assert refused.returncode == 1
    assert "already holds yuxi's state" in refused.stderr and "--force" in refused.stderr
    assert _state(target) == changed

    forced = _yuxi("db", "restore", "--force", str(dumped), env=_env(target, tmp_path))
    assert forced.returncode == 0, forced.stderr
    assert _state(target) == before
    [safety] = [p for p in dumped.parent.iterdir() if p.name.startswith("yuxi-before-restore-")]
    assert f"saving the current state to {safety}" in forced.stderr

    # a restore with yuxi still connected is refused
    with psycopg.connect(target, autocommit=True):
        busy = _yuxi("db", "restore", "--force", str(safety), env=_env(target, tmp_path))
    assert busy.returncode == 1 and "other session" in busy.stderr
    assert _state(target) == before


async def test_a_dump_of_an_older_schema_is_migrated_on_restore(
    new_database: Callable[[], str], tmp_path: Path
) -> None:
    older = tmp_path / "older-migrations"
    older.mkdir()
    for path in sorted(migrations_dir().glob("*.sql"))[:24]:  # up to 0024
        shutil.copy(path, older / path.name)
    source = new_database()
    migrate(source, directory=older)
    dumped = tmp_path / "old.dump"
    assert _yuxi("db", "dump", str(dumped), env=_env(source, tmp_path)).returncode == 0

    target = new_database()
    restored = _yuxi("db", "restore", str(dumped), env=_env(target, tmp_path))
    assert restored.returncode == 0, restored.stderr
    assert "applying 0025_server_key.sql" in restored.stderr
    applied = {row[0] for row in _rows(target, "SELECT name FROM yuxi.schema_migrations")}
    assert {path.name for path in migrations_dir().glob("*.sql")} <= applied


FAKE_PG_DUMP = """#!/bin/sh
# a pg_dump that writes half a dump, then fails
for argument in "$@"; do
  case "$argument" in
    --version) echo "pg_dump (PostgreSQL) 99.0"; exit 0;;
    --file=*) printf 'PGDMP half' > "${argument#--file=}";;
  esac
done
echo "pg_dump: error: simulated failure" >&2
exit 1
"""


def test_a_failed_dump_leaves_no_file(db_url: str, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "pg_dump"
    fake.write_text(FAKE_PG_DUMP)
    fake.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    env = {**_env(db_url, tmp_path), "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    failed = _yuxi("db", "dump", str(out / "new.dump"), env=env)
    assert failed.returncode == 1
    assert "simulated failure" in failed.stderr and "Traceback" not in failed.stderr
    assert list(out.iterdir()) == []

    (out / "kept.dump").write_bytes(b"an older dump")
    again = _yuxi("db", "dump", str(out / "kept.dump"), env=env)
    assert again.returncode == 1
    assert [p.name for p in out.iterdir()] == ["kept.dump"]
    assert (out / "kept.dump").read_bytes() == b"an older dump"
