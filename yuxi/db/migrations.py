"""Brings a database to the schema this yuxi needs.

Three parts, applied in this order under one advisory lock (so concurrent runners
serialise and the second finds nothing to do):

1. procrastinate's schema (the delivery queue), recorded with a checksum;
2. the LangGraph checkpointer tables and then LangGraph's store tables (the ``/lg``
   store's and the graphs' ``get_store()``); their own migration tables decide what to
   run;
3. yuxi's ``sql/migrations/NNNN_name.sql``, each in its own transaction, recorded with a
   SHA-256 checksum. An applied migration whose file changed is refused, and so is a
   database that has migrations this code does not know.

``sql/schema/`` holds the current definition of schema ``yuxi``; the migrations are
``0001_baseline.sql``, generated from it (``python -m yuxi.db.migrations baseline``),
then one delta per change. A change edits ``sql/schema/<noun>.sql`` and adds a delta;
tests/integration/test_schema.py proves that both build the same database.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from yuxi.db.paths import migrations_dir, schema_dir

MIGRATION_LOCK_KEY = 7_420_117_001  # pg_advisory_lock key owned by the migration runner
PROCRASTINATE = "procrastinate:schema"
CHECKPOINTER = "langgraph:checkpointer"
STORE = "langgraph:store"
_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


class MigrationError(RuntimeError):
    """The database cannot be migrated safely; the message says why and what to do."""


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


@dataclass(frozen=True)
class MigrationStatus:
    name: str
    state: str  # applied | pending | edited | unknown
    applied_at: datetime | None


def load_migrations(directory: Path | None = None) -> list[Migration]:
    """Reads NNNN_name.sql files in order; refuses gaps, duplicates and odd names."""
    directory = directory or migrations_dir()
    migrations: list[Migration] = []
    for path in sorted(directory.glob("*.sql")):
        match = _NAME.match(path.name)
        if match is None:
            raise MigrationError(f"{path.name}: migration files are named NNNN_lowercase_name.sql")
        expected = len(migrations) + 1
        if int(match.group(1)) != expected:
            raise MigrationError(f"{path.name}: expected migration number {expected:04d}")
        migrations.append(Migration(path.name, path.read_text()))
    return migrations


def load_schema(directory: Path | None = None) -> list[tuple[str, str]]:
    """The files of ``sql/schema/`` as (name, text), in the order they are applied."""
    directory = directory or schema_dir()
    return [(path.name, path.read_text()) for path in sorted(directory.glob("*.sql"))]


BASELINE = "0001_baseline.sql"
# The first of the migrations the baseline replaced, before anything was released.
_PRE_BASELINE = "0001_schema.sql"


def baseline_sql(directory: Path | None = None) -> str:
    """``0001_baseline.sql`` as generated from ``sql/schema/``: the files concatenated.

    Only for regenerating the baseline before anything is released: once a database has
    applied it, the baseline is never edited again (the runner refuses edited migrations).
    """
    parts = [
        "-- yuxi: the baseline, generated from sql/schema/ by\n"
        "--     uv run python -m yuxi.db.migrations baseline > sql/migrations/0001_baseline.sql\n"
        "-- Do not edit: change sql/schema/<noun>.sql and add a numbered delta migration.\n"
    ]
    for name, text in load_schema(directory):
        parts.append(f"-- {'=' * 85}\n-- sql/schema/{name}\n\n{text.rstrip()}\n")
    return "\n".join(parts)


def _procrastinate_migration() -> Migration:
    from procrastinate.schema import SchemaManager

    return Migration(PROCRASTINATE, SchemaManager.get_schema())


def _ensure_ledger(conn: psycopg.Connection[dict[str, object]]) -> None:
    conn.execute("CREATE SCHEMA IF NOT EXISTS yuxi")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS yuxi.schema_migrations ("
        " name text PRIMARY KEY, checksum text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())"
    )


def _recorded(conn: psycopg.Connection[dict[str, object]]) -> dict[str, dict[str, object]]:
    exists = conn.execute("SELECT to_regclass('yuxi.schema_migrations') AS t").fetchone()
    if exists is None or exists["t"] is None:
        return {}
    rows = conn.execute("SELECT name, checksum, applied_at FROM yuxi.schema_migrations").fetchall()
    return {str(row["name"]): row for row in rows}


def _check_recorded(
    recorded: dict[str, dict[str, object]], migrations: Sequence[Migration]
) -> None:
    known = {m.name for m in migrations} | {PROCRASTINATE, CHECKPOINTER, STORE}
    unknown = sorted(set(recorded) - known)
    if _PRE_BASELINE in unknown:
        raise MigrationError(
            f"the database was migrated before yuxi's migrations became {BASELINE}"
            f" ({_PRE_BASELINE} ... 0012 are recorded) and cannot be migrated forward;"
            " re-create it: stop yuxi and remove its data directory (.yuxi, or YUXI_HOME),"
            " or point YUXI_DATABASE_URL at a fresh, empty database"
        )
    if unknown:
        raise MigrationError(
            f"the database has migrations this yuxi does not know: {', '.join(unknown)}; "
            "it was migrated by a newer yuxi — upgrade yuxi instead"
        )
    for migration in migrations:
        row = recorded.get(migration.name)
        if row is not None and row["checksum"] != migration.checksum:
            raise MigrationError(
                f"migration {migration.name} was edited after it was applied "
                f"(applied sha256 {str(row['checksum'])[:12]}…,"
                f" file now {migration.checksum[:12]}…); "
                "restore the file and put the change in a new migration"
            )


def migrate(
    url: str,
    *,
    progress: Callable[[str], None] | None = None,
    directory: Path | None = None,
) -> list[str]:
    """Applies whatever is missing; returns the names applied (empty when up to date)."""
    say = progress or (lambda _message: None)
    migrations = load_migrations(directory)
    procrastinate = _procrastinate_migration()
    applied: list[str] = []
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        _take_migration_lock(conn, say)
        try:
            _ensure_ledger(conn)
            recorded = _recorded(conn)
            _check_recorded(recorded, [procrastinate, *migrations])

            if PROCRASTINATE not in recorded:
                say("applying procrastinate schema")
                with conn.transaction():
                    conn.execute(procrastinate.sql)
                    _record(conn, procrastinate)
                applied.append(PROCRASTINATE)

            if _setup_checkpointer(conn):
                say("applied LangGraph checkpointer migrations")
                applied.append(CHECKPOINTER)

            if _setup_store(conn):
                say("applied LangGraph store migrations")
                applied.append(STORE)

            for migration in migrations:
                if migration.name in recorded:
                    continue
                say(f"applying {migration.name}")
                with conn.transaction():
                    conn.execute(migration.sql)
                    _record(conn, migration)
                applied.append(migration.name)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
    return applied


def _take_migration_lock(
    conn: psycopg.Connection[dict[str, object]], say: Callable[[str], None]
) -> None:
    """Waits for the advisory lock by polling, not by blocking: a session blocked in
    pg_advisory_lock holds a snapshot, and the checkpointer's CREATE INDEX CONCURRENTLY
    in the lock holder would wait for that snapshot forever."""
    waited = False
    while True:
        row = conn.execute(
            "SELECT pg_try_advisory_lock(%s) AS ok", (MIGRATION_LOCK_KEY,)
        ).fetchone()
        if row is not None and row["ok"]:
            return
        if not waited:
            say("another migration is running; waiting for it")
            waited = True
        time.sleep(0.1)


def _record(conn: psycopg.Connection[dict[str, object]], migration: Migration) -> None:
    conn.execute(
        "INSERT INTO yuxi.schema_migrations (name, checksum) VALUES (%s, %s)"
        " ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, applied_at = now()",
        (migration.name, migration.checksum),
    )


def _setup_checkpointer(conn: psycopg.Connection[dict[str, object]]) -> bool:
    """Runs the checkpointer's own migrations; True when any were applied."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.base import BasePostgresSaver

    total = len(BasePostgresSaver.MIGRATIONS)
    return _setup_langgraph(conn, CHECKPOINTER, "checkpoint_migrations", total, PostgresSaver)


def _setup_store(conn: psycopg.Connection[dict[str, object]]) -> bool:
    """Runs the migrations of LangGraph's own ``PostgresStore`` (tables ``public.store``
    and ``public.store_migrations``, no vector index); True when any were applied."""
    from langgraph.store.postgres import PostgresStore
    from langgraph.store.postgres.base import BasePostgresStore

    total = len(BasePostgresStore.MIGRATIONS)
    return _setup_langgraph(conn, STORE, "store_migrations", total, PostgresStore)


def _setup_langgraph(
    conn: psycopg.Connection[dict[str, object]],
    name: str,
    versions_table: str,
    total: int,
    kind: Any,
) -> bool:
    """Runs the ``setup()`` of a LangGraph Postgres class (``kind``) unless its
    ``public.<versions_table>`` has all ``total`` versions, on a connection configured as
    it requires, and records it as ``name`` in yuxi's migrations; True when it ran."""
    exists = conn.execute("SELECT to_regclass(%s) AS t", (f"public.{versions_table}",)).fetchone()
    if exists is not None and exists["t"] is not None:
        done = conn.execute(
            sql.SQL("SELECT coalesce(max(v), -1) AS v FROM public.{}").format(
                sql.Identifier(versions_table)
            )
        )
        row = done.fetchone()
        if row is not None and row["v"] == total - 1:
            return False
    with psycopg.connect(
        conn.info.dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as own:
        kind(own).setup()
    conn.execute(
        "INSERT INTO yuxi.schema_migrations (name, checksum) VALUES (%s, %s)"
        " ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, applied_at = now()",
        (name, f"v{total}"),
    )
    return True


def status(url: str, *, directory: Path | None = None) -> list[MigrationStatus]:
    """Every known and recorded migration with its state."""
    migrations = [_procrastinate_migration(), *load_migrations(directory)]
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        recorded = _recorded(conn)
    result: list[MigrationStatus] = []
    for migration in migrations:
        row = recorded.get(migration.name)
        if row is None:
            result.append(MigrationStatus(migration.name, "pending", None))
        else:
            state = "applied" if row["checksum"] == migration.checksum else "edited"
            result.append(MigrationStatus(migration.name, state, _when(row)))
    from langgraph.checkpoint.postgres.base import BasePostgresSaver

    checkpointer = recorded.get(CHECKPOINTER)
    current = f"v{len(BasePostgresSaver.MIGRATIONS)}"
    result.insert(
        1,
        MigrationStatus(
            CHECKPOINTER,
            "applied"
            if checkpointer is not None and checkpointer["checksum"] == current
            else "pending",
            None if checkpointer is None else _when(checkpointer),
        ),
    )
    from langgraph.store.postgres.base import BasePostgresStore

    store = recorded.get(STORE)
    store_current = f"v{len(BasePostgresStore.MIGRATIONS)}"
    result.insert(
        2,
        MigrationStatus(
            STORE,
            "applied" if store is not None and store["checksum"] == store_current else "pending",
            None if store is None else _when(store),
        ),
    )
    known = {m.name for m in migrations} | {CHECKPOINTER, STORE}
    for name in sorted(set(recorded) - known):
        result.append(MigrationStatus(name, "unknown", _when(recorded[name])))
    return result


def _when(row: dict[str, object]) -> datetime | None:
    value = row.get("applied_at")
    return value if isinstance(value, datetime) else None


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m yuxi.db.migrations baseline``: prints the generated baseline."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["baseline"]:
        print("usage: python -m yuxi.db.migrations baseline > sql/migrations/0001_baseline.sql")
        return 2
    sys.stdout.write(baseline_sql())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
