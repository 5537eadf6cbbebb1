"""docs/reference/sql.md, generated from a migrated database.

The reference lists what schema ``yuxi`` offers as the catalog describes it: functions
with their signature, result and comment, views, composite types and tables with their
columns. It is written from ``COMMENT ON`` and the catalog only, so it cannot drift from
the SQL; tests/integration/test_schema.py fails when the committed file is stale.

    uv run python -m yuxi.db.reference > docs/reference/sql.md

builds a scratch database (on a throwaway embedded server, or on the server of
``--database-url``), migrates it, renders it and drops it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo, sql
from psycopg.rows import dict_row

COMMAND = "uv run python -m yuxi.db.reference > docs/reference/sql.md"
# Comments of helpers that callers should not use start with this word.
INTERNAL = "Internal:"
# The migration runner's ledger has no COMMENT: the runner creates it outside sql/schema/.
_LEDGER = "schema_migrations"

_FUNCTIONS = """
    SELECT p.proname AS name, pg_get_function_arguments(p.oid) AS arguments,
           pg_get_function_result(p.oid) AS result,
           coalesce(obj_description(p.oid, 'pg_proc'), '') AS comment
    FROM pg_proc p
    WHERE p.pronamespace = 'yuxi'::regnamespace
    ORDER BY p.proname, pg_get_function_identity_arguments(p.oid)"""

_RELATIONS = """
    SELECT c.oid, c.relname AS name, c.relkind::text AS kind,
           coalesce(obj_description(c.oid, 'pg_class'), obj_description(c.reltype, 'pg_type'), '')
               AS comment
    FROM pg_class c
    WHERE c.relnamespace = 'yuxi'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'c')
    ORDER BY c.relname"""

_COLUMNS = """
    SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type,
           a.attnotnull AS not_null, a.attgenerated <> '' AS generated,
           a.attidentity <> '' AS identity,
           CASE WHEN a.attgenerated = '' THEN pg_get_expr(d.adbin, d.adrelid) END AS "default",
           coalesce(col_description(a.attrelid, a.attnum), '') AS comment
    FROM pg_attribute a
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
    ORDER BY a.attnum"""


def _split_top_level(text: str) -> list[str]:
    """``a, b(c, d), 'e, f'`` -> ``["a", "b(c, d)", "'e, f'"]``."""
    parts: list[str] = []
    depth, quoted, start = 0, False, 0
    for i, char in enumerate(text):
        if char == "'":
            quoted = not quoted
        elif not quoted and char == "(":
            depth += 1
        elif not quoted and char == ")":
            depth -= 1
        elif not quoted and depth == 0 and text.startswith(", ", i):
            parts.append(text[start:i])
            start = i + 2
    parts.append(text[start:])
    return [part for part in parts if part]


def _listed(head: str, items: str, tail: str = "") -> list[str]:
    """``head(items)tail`` on one line when short, else one item per line."""
    line = f"{head}({items}){tail}"
    if len(line) <= 88:
        return [line]
    items_list = _split_top_level(items)
    body = [f"    {item}," for item in items_list[:-1]] + [f"    {items_list[-1]}"]
    return [f"{head}(", *body, f"){tail}"]


def _signature(fn: dict[str, Any]) -> list[str]:
    result: str = fn["result"]
    if result.startswith("TABLE(") and result.endswith(")"):
        returns = _listed("RETURNS TABLE ", result[len("TABLE(") : -1])
    else:
        returns = [f"RETURNS {result}"]
    arguments = _listed(f"yuxi.{fn['name']}", fn["arguments"])
    if len(arguments) == 1 and len(returns) == 1 and len(arguments[0] + returns[0]) < 88:
        return [f"{arguments[0]} {returns[0]}"]
    return [*arguments[:-1], f"{arguments[-1]} {returns[0]}", *returns[1:]]


_CHECKS = """
    SELECT pg_get_constraintdef(con.oid) AS definition
    FROM pg_constraint con
    WHERE con.conrelid = %s AND con.contype = 'c'
    ORDER BY con.conname"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _function_section(title: str, intro: str, functions: list[dict[str, Any]]) -> list[str]:
    lines = [f"## {title}", "", intro, ""]
    for fn in functions:
        lines += [
            f"### `yuxi.{fn['name']}`",
            "",
            "```sql",
            *_signature(fn),
            "```",
            "",
        ]
        if fn["comment"]:
            lines += [fn["comment"], ""]
    return lines


def _column_table(columns: list[dict[str, Any]], *, table: bool) -> list[str]:
    if not table:
        lines = ["| column | type |", "|---|---|"]
        return lines + [f"| `{c['name']}` | {_cell(c['type'])} |" for c in columns]
    lines = ["| column | type | null | default | comment |", "|---|---|---|---|---|"]
    for c in columns:
        if c["generated"]:
            default = "generated"
        elif c["identity"]:
            default = "identity"
        else:
            default = f"`{_cell(c['default'])}`" if c["default"] else ""
        null = "not null" if c["not_null"] else "null"
        lines.append(
            f"| `{c['name']}` | {_cell(c['type'])} | {null} | {default} | {_cell(c['comment'])} |"
        )
    return lines


def render(conn: psycopg.Connection[Any]) -> str:
    """The reference of the database ``conn`` is connected to, as Markdown."""
    with conn.cursor(row_factory=dict_row) as cur:
        functions = cur.execute(_FUNCTIONS).fetchall()
        relations = cur.execute(_RELATIONS).fetchall()
        columns = {r["oid"]: cur.execute(_COLUMNS, (r["oid"],)).fetchall() for r in relations}
        checks = {
            r["oid"]: [c["definition"] for c in cur.execute(_CHECKS, (r["oid"],)).fetchall()]
            for r in relations
        }

    triggers = [f for f in functions if f["result"] == "trigger"]
    internal = [f for f in functions if f not in triggers and f["comment"].startswith(INTERNAL)]
    public = [f for f in functions if f not in triggers and f not in internal]

    lines = [
        "# SQL reference: schema `yuxi`",
        "",
        "<!-- Generated from a migrated database; do not edit. Regenerate with",
        f"     {COMMAND} -->",
        "",
        "Every function, view, composite type and table of schema `yuxi`, with the comment",
        "the SQL gives it. The definitions live in `sql/schema/` (one file per noun); the",
        "error codes and conventions are at the top of `sql/schema/00_vocabulary.sql`, and",
        "[operations.md](../operations.md) has the psql recipes.",
        "",
    ]
    lines += _function_section(
        "Functions", "What the API, the worker, the CLI and operators call.", public
    )
    lines += _function_section(
        "Internal helpers",
        "Called by the functions above; not meant to be called on their own.",
        internal,
    )
    lines += _function_section(
        "Trigger functions", "The guards and notifications behind the tables' triggers.", triggers
    )
    for title, kinds, table in (
        ("Views", ("v", "m"), False),
        ("Composite types", ("c",), False),
        ("Tables", ("r", "p"), True),
    ):
        lines += [f"## {title}", ""]
        for relation in (r for r in relations if r["kind"] in kinds):
            lines += [f"### `yuxi.{relation['name']}`", ""]
            comment = relation["comment"]
            if relation["name"] == _LEDGER and not comment:
                comment = "The migration runner's ledger (yuxi/db/migrations.py)."
            if comment:
                lines += [comment, ""]
            lines += [*_column_table(columns[relation["oid"]], table=table), ""]
            if checks[relation["oid"]]:
                lines += [*(f"- `{check}`" for check in checks[relation["oid"]]), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def render_fresh(server_url: str) -> str:
    """Migrates a scratch database on ``server_url``, renders it, and drops it."""
    from yuxi.db.migrations import migrate

    name = f"yuxi_reference_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        url = conninfo.make_conninfo(server_url, dbname=name)
        migrate(url)
        with psycopg.connect(url) as conn:
            return render(conn)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def main(argv: Sequence[str] | None = None) -> int:
    """Prints the reference; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m yuxi.db.reference", description=__doc__)
    parser.add_argument(
        "--database-url", help="a server to build the scratch database on (default: embedded)"
    )
    args = parser.parse_args(argv)
    if args.database_url:
        sys.stdout.write(render_fresh(args.database_url))
        return 0
    from yuxi.db.embedded import start_embedded

    with tempfile.TemporaryDirectory(prefix="yuxi-reference-") as home:
        server = start_embedded(Path(home) / "pgdata", delete_on_exit=True)
        try:
            sys.stdout.write(render_fresh(str(server.get_uri())))
        finally:
            server.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
