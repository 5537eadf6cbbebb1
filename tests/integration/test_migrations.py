"""The migration runner against real databases."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.conftest import database_url
from yuxi.db.migrations import MigrationError, migrate, status
from yuxi.db.paths import migrations_dir


@pytest.fixture
def empty_db(pg_server_url: str) -> Iterator[str]:
    name = f"yuxi_mig_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield database_url(pg_server_url, name)
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _yuxi_objects(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT c.relkind::text, c.relname FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'yuxi' UNION ALL"
            " SELECT 'f', p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'yuxi' ORDER BY 1, 2"
        ).fetchall()


def test_migrate_from_empty_then_again_is_a_no_op(empty_db: str) -> None:
    applied = migrate(empty_db)
    names = [path.name for path in sorted(migrations_dir().glob("*.sql"))]
    assert applied == ["procrastinate:schema", "langgraph:checkpointer", "langgraph:store", *names]
    before = _yuxi_objects(empty_db)
    assert ("r", "agent_runs") in before and ("f", "request_submit") in before
    assert migrate(empty_db) == []
    assert _yuxi_objects(empty_db) == before
    assert {row.state for row in status(empty_db)} == {"applied"}
    with psycopg.connect(empty_db) as conn:
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
        }
    assert {"procrastinate_jobs", "checkpoints", "checkpoint_writes"} <= tables


def test_two_concurrent_cli_migrations_both_succeed(empty_db: str) -> None:
    env = {**os.environ, "YUXI_DATABASE_URL": empty_db}
    command = [sys.executable, "-m", "yuxi.cli", "db", "migrate"]
    runners = [
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [runner.communicate(timeout=120) for runner in runners]
    assert [runner.returncode for runner in runners] == [0, 0], outputs
    finals = sorted(out.strip().splitlines()[-1] for out, _ in outputs)
    assert finals[0].startswith("applied ") and finals[1] == "database is up to date"
    assert {row.state for row in status(empty_db)} == {"applied"}


def test_an_edited_applied_migration_is_refused(empty_db: str, tmp_path: Path) -> None:
    directory = tmp_path / "migrations"
    shutil.copytree(migrations_dir(), directory)
    migrate(empty_db, directory=directory)
    edited = directory / "0001_baseline.sql"
    edited.write_text(edited.read_text() + "\n-- a quiet edit\n")
    with pytest.raises(MigrationError, match=r"0001_baseline\.sql was edited after it was applied"):
        migrate(empty_db, directory=directory)
    assert [
        r.state for r in status(empty_db, directory=directory) if r.name == "0001_baseline.sql"
    ] == ["edited"]


def test_a_new_migration_is_applied_and_unknown_ones_are_refused(
    empty_db: str, tmp_path: Path
) -> None:
    directory = tmp_path / "migrations"
    shutil.copytree(migrations_dir(), directory)
    migrate(empty_db, directory=directory)
    number = len(list(directory.glob("*.sql"))) + 1
    extra = directory / f"{number:04d}_extra.sql"
    extra.write_text("CREATE TABLE yuxi.extra (id int);")
    assert migrate(empty_db, directory=directory) == [extra.name]
    extra.unlink()
    with pytest.raises(MigrationError, match="does not know"):
        migrate(empty_db, directory=directory)


def test_a_failing_migration_leaves_nothing_behind(empty_db: str, tmp_path: Path) -> None:
    directory = tmp_path / "migrations"
    shutil.copytree(migrations_dir(), directory)
    migrate(empty_db, directory=directory)
    number = len(list(directory.glob("*.sql"))) + 1
    broken = directory / f"{number:04d}_broken.sql"
    broken.write_text("CREATE TABLE yuxi.half (id int); SELECT 1/0;")
    with pytest.raises(psycopg.errors.DivisionByZero):
        migrate(empty_db, directory=directory)
    with psycopg.connect(empty_db) as conn:
        assert conn.execute("SELECT to_regclass('yuxi.half')").fetchone() == (None,)
    assert [r.state for r in status(empty_db, directory=directory) if r.name == broken.name] == [
        "pending"
    ]


def test_a_database_from_before_the_baseline_is_refused_with_what_to_do(empty_db: str) -> None:
    migrate(empty_db)
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO yuxi.schema_migrations (name, checksum)"
            " VALUES ('0001_schema.sql', 'x'), ('0012_request_followers.sql', 'y')"
        )
    with pytest.raises(MigrationError, match="re-create it"):
        migrate(empty_db)
    assert {r.name for r in status(empty_db) if r.state == "unknown"} == {
        "0001_schema.sql",
        "0012_request_followers.sql",
    }
