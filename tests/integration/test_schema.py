"""The migrations and sql/schema/ describe the same database.

One database is built by the migration runner, one by applying ``sql/schema/*.sql`` in
file order (after procrastinate's schema, which yuxi's SQL inserts jobs into). Their
catalogs are compared object by object: a change written on one side only fails here.
"""

from __future__ import annotations

import difflib
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.conftest import database_url
from yuxi.db.migrations import load_schema
from yuxi.db.reference import COMMAND, render

_REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "sql.md"

# The migration runner's own ledger exists only in migrated databases.
_RUNNER_TABLES = ("schema_migrations",)

# Each query returns (key, definition) rows for one kind of object in schema yuxi.
_CATALOG = {
    "function": """
        SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid)
        FROM pg_proc p WHERE p.pronamespace = 'yuxi'::regnamespace""",
    "relation": """
        SELECT c.oid::regclass::text,
               c.relkind::text || ' ' || c.relpersistence::text
               || coalesce(' ' || array_to_string(c.reloptions, ','), '')
        FROM pg_class c
        WHERE c.relnamespace = 'yuxi'::regnamespace AND c.relkind <> 'i'
          AND c.relname <> ALL (%(runner)s)""",
    "view": """
        SELECT c.oid::regclass::text, pg_get_viewdef(c.oid)
        FROM pg_class c
        WHERE c.relnamespace = 'yuxi'::regnamespace AND c.relkind IN ('v', 'm')""",
    "trigger": """
        SELECT t.tgrelid::regclass::text || ' ' || t.tgname, pg_get_triggerdef(t.oid)
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = 'yuxi'::regnamespace AND NOT t.tgisinternal""",
    "index": """
        SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE c.relnamespace = 'yuxi'::regnamespace
          AND i.indrelid::regclass::text <> ALL (%(runner_qualified)s)""",
    "constraint": """
        SELECT coalesce(con.conrelid::regclass::text, con.contypid::regtype::text)
               || ' ' || con.conname,
               pg_get_constraintdef(con.oid)
        FROM pg_constraint con
        WHERE con.connamespace = 'yuxi'::regnamespace
          AND coalesce(con.conrelid::regclass::text, '') <> ALL (%(runner_qualified)s)""",
    "column": """
        SELECT a.attrelid::regclass::text || '.' || a.attname,
               format_type(a.atttypid, a.atttypmod)
               || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
               || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
               || CASE a.attgenerated WHEN 's' THEN ' stored' ELSE '' END
               || CASE a.attidentity WHEN '' THEN '' ELSE ' identity ' || a.attidentity::text END
               || coalesce(' collate ' || nullif(a.attcollation, 0)::regcollation::text, '')
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace = 'yuxi'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'c')
          AND a.attnum > 0 AND NOT a.attisdropped AND c.relname <> ALL (%(runner)s)""",
    # Column order matters to row types (SELECT *, RETURNS yuxi.agent_runs), so a
    # column added by a delta must be written last in its CREATE TABLE too.
    "column order": """
        SELECT a.attrelid::regclass::text, string_agg(a.attname, ', ' ORDER BY a.attnum)
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        WHERE c.relnamespace = 'yuxi'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'c')
          AND a.attnum > 0 AND NOT a.attisdropped AND c.relname <> ALL (%(runner)s)
        GROUP BY a.attrelid""",
    "type": """
        SELECT t.oid::regtype::text,
               t.typtype::text
               || CASE WHEN t.typtype = 'd'
                       THEN ' over ' || format_type(t.typbasetype, t.typtypmod)
                            || CASE WHEN t.typnotnull THEN ' not null' ELSE '' END
                            || coalesce(' default ' || t.typdefault, '')
                       ELSE '' END
               || coalesce(' labels ' || (SELECT string_agg(e.enumlabel, ', '
                                                            ORDER BY e.enumsortorder)
                                          FROM pg_enum e WHERE e.enumtypid = t.oid), '')
        FROM pg_type t
        WHERE t.typnamespace = 'yuxi'::regnamespace AND t.typtype IN ('c', 'd', 'e')
          AND NOT EXISTS (SELECT 1 FROM pg_class c
                          WHERE c.oid = t.typrelid AND c.relkind <> 'c')""",
    "sequence": """
        SELECT s.seqrelid::regclass::text,
               format_type(s.seqtypid, NULL) || ' ' || s.seqstart || ' ' || s.seqincrement
               || ' ' || s.seqmin || ' ' || s.seqmax || ' ' || s.seqcache || ' ' || s.seqcycle
        FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid
        WHERE c.relnamespace = 'yuxi'::regnamespace""",
    "comment": """
        SELECT o.type || ' ' || o.identity, d.description
        FROM pg_description d,
             LATERAL pg_identify_object(d.classoid, d.objoid, d.objsubid) o
        WHERE o.schema = 'yuxi' OR (o.type = 'schema' AND o.identity = 'yuxi')""",
    # Rows the schema seeds (the system defaults an operator may change).
    "data": """
        SELECT 'yuxi.system_settings ' || key, value FROM yuxi.system_settings""",
}


def catalog(url: str) -> dict[str, str]:
    """Every object of schema yuxi as ``"kind key" -> definition``."""
    params = {
        "runner": list(_RUNNER_TABLES),
        "runner_qualified": [f"yuxi.{name}" for name in _RUNNER_TABLES],
    }
    result: dict[str, str] = {}
    with psycopg.connect(url) as conn:
        for kind, query in _CATALOG.items():
            for key, definition in conn.execute(query, params).fetchall():
                result[f"{kind} {key}"] = str(definition)
    return result


def differences(left: dict[str, str], right: dict[str, str]) -> list[str]:
    """What differs between two catalogs, one readable entry per object."""
    found: list[str] = []
    for key in sorted(left.keys() | right.keys()):
        if key not in right:
            found.append(f"{key}: only in the migrated database")
        elif key not in left:
            found.append(f"{key}: only in the database built from sql/schema/")
        elif left[key] != right[key]:
            diff = difflib.unified_diff(
                left[key].splitlines(),
                right[key].splitlines(),
                "migrations",
                "sql/schema",
                lineterm="",
            )
            found.append(f"{key} differs:\n" + "\n".join(diff))
    return found


def apply_schema(url: str) -> None:
    """Builds yuxi's schema from sql/schema/, on top of procrastinate's."""
    from procrastinate.schema import SchemaManager

    with psycopg.connect(url, autocommit=True) as conn:
        with conn.transaction():
            conn.execute(SchemaManager.get_schema())
        with conn.transaction():
            for _name, text in load_schema():
                conn.execute(text)


def _create(server_url: str, name: str, template: str | None = None) -> str:
    with psycopg.connect(server_url, autocommit=True) as conn:
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
        conn.execute(statement)
    return database_url(server_url, name)


def _drop(server_url: str, name: str) -> None:
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture(scope="module")
def schema_database(pg_server_url: str) -> Iterator[str]:
    """A database built from sql/schema/ (the name, for cloning)."""
    name = f"yuxi_schema_{uuid.uuid4().hex[:10]}"
    url = _create(pg_server_url, name)
    try:
        apply_schema(url)
        yield name
    finally:
        _drop(pg_server_url, name)


@pytest.fixture(scope="module")
def migrated_catalog(pg_server_url: str, template_database: str) -> dict[str, str]:
    return catalog(database_url(pg_server_url, template_database))


def test_the_migrations_build_what_sql_schema_describes(
    pg_server_url: str, schema_database: str, migrated_catalog: dict[str, str]
) -> None:
    found = differences(migrated_catalog, catalog(database_url(pg_server_url, schema_database)))
    assert not found, (
        "the migrations and sql/schema/ disagree; a change goes into sql/schema/<noun>.sql"
        " and into a new numbered migration:\n\n" + "\n\n".join(found)
    )


def test_the_comparison_covers_every_kind_of_object(migrated_catalog: dict[str, str]) -> None:
    kinds = {key.split(" ")[0] for key in migrated_catalog}
    assert kinds >= {"function", "view", "trigger", "index", "constraint", "column", "type"}
    assert "function yuxi.request_submit(uuid,uuid,text,text,text,text,text,text)" in (
        migrated_catalog
    )


# One-sided edits, each applied to a scratch copy of the schema-built database; the
# comparison must name the object that changed.
_ONE_SIDED_EDITS = [
    (
        "CREATE OR REPLACE FUNCTION yuxi.run_is_active(p_status text) RETURNS boolean"
        " LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT p_status IN ('pending') $$",
        "function yuxi.run_is_active(text) differs",
    ),
    (
        "COMMENT ON FUNCTION yuxi.request_submit(uuid, uuid, text, text, text, text, text, text)"
        " IS 'edited on one side'",
        "comment function yuxi.request_submit(",
    ),
    (
        "CREATE INDEX agent_runs_extra_idx ON yuxi.agent_runs (finished_at)",
        "index yuxi.agent_runs_extra_idx: only in the database built from sql/schema/",
    ),
    (
        "ALTER TABLE yuxi.agent_runs ALTER COLUMN error_type SET DEFAULT 'x'",
        "column yuxi.agent_runs.error_type differs",
    ),
    (
        "ALTER TABLE yuxi.agent_runs ADD COLUMN extra integer",
        "column order yuxi.agent_runs differs",
    ),
    (
        "ALTER TABLE yuxi.agent_runs ADD CONSTRAINT extra_check CHECK (attempt_count < 100)",
        "constraint yuxi.agent_runs extra_check: only in",
    ),
    (
        "DROP TRIGGER agent_runs_resume_created ON yuxi.agent_runs",
        "trigger yuxi.agent_runs agent_runs_resume_created: only in the migrated database",
    ),
    (
        "CREATE OR REPLACE VIEW yuxi.due_jobs AS"
        " SELECT j.id, j.uid, j.agent_slug, j.cron, j.timezone, j.next_fire_at, j.last_fired_at"
        " FROM yuxi.scheduled_agent_jobs j WHERE j.enabled",
        "view yuxi.due_jobs differs",
    ),
    (
        "UPDATE yuxi.system_settings SET value = 'other' WHERE key = 'default_model'",
        "data yuxi.system_settings default_model differs",
    ),
]


@pytest.mark.parametrize(("edit", "reported"), _ONE_SIDED_EDITS)
def test_an_edit_on_one_side_only_is_reported(
    pg_server_url: str,
    schema_database: str,
    migrated_catalog: dict[str, str],
    edit: str,
    reported: str,
) -> None:
    name = f"yuxi_scratch_{uuid.uuid4().hex[:10]}"
    url = _create(pg_server_url, name, template=schema_database)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(edit)
        found = differences(migrated_catalog, catalog(url))
    finally:
        _drop(pg_server_url, name)
    assert len(found) >= 1
    assert any(entry.startswith(reported) for entry in found), found


def test_every_function_view_type_and_table_has_a_comment(
    pg_server_url: str, template_database: str
) -> None:
    with psycopg.connect(database_url(pg_server_url, template_database)) as conn:
        missing = conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p"
            " WHERE p.pronamespace = 'yuxi'::regnamespace"
            "   AND obj_description(p.oid, 'pg_proc') IS NULL"
            " UNION ALL"
            " SELECT c.oid::regclass::text FROM pg_class c"
            " WHERE c.relnamespace = 'yuxi'::regnamespace AND c.relkind IN ('r', 'v', 'c')"
            "   AND c.relname <> ALL (%s) AND obj_description(c.oid, 'pg_class') IS NULL"
            "   AND obj_description(c.reltype, 'pg_type') IS NULL",
            (list(_RUNNER_TABLES),),
        ).fetchall()
    assert missing == [], "add a COMMENT ON for these in sql/schema/ (and a migration)"


def test_the_sql_reference_is_current(pg_server_url: str, template_database: str) -> None:
    with psycopg.connect(database_url(pg_server_url, template_database)) as conn:
        current = render(conn)
    committed = _REFERENCE.read_text() if _REFERENCE.exists() else ""
    assert committed == current, f"docs/reference/sql.md is stale; regenerate it: {COMMAND}"
