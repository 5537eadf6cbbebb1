"""Python sends SQL to schema ``yuxi`` only through the thin wrappers of ``yuxi/queue/``
(one module per SQL noun) and the scheduling jobs' in ``yuxi/scheduling/``; the
migration runner's own bookkeeping (``yuxi/db/migrations.py``) sits below the schema.
Anywhere else, a string that is SQL and names a ``yuxi.`` table or function fails here,
with its file and line.

What counts as SQL: a string literal (implicitly concatenated pieces and f-strings
read as one text) that is not a docstring or other bare string statement, names a
table, view or function that ``sql/schema/`` creates, and either has SQL keywords
(``SELECT``, ``FROM``, ``UPDATE``, …), or passes arguments to a function it names
(``%(name)s``, ``%s``, ``=>``), or is nothing but a call (``"yuxi.user_list()"``, as
``call_many`` takes it). Prose that mentions a function (``"… reading
yuxi.metrics_snapshot()"``) is none of these. A ``psycopg.sql.Identifier("yuxi", …)``
counts too."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "yuxi"
SCHEMA = ROOT / "sql" / "schema"
WRAPPER_LAYER = (PACKAGE / "queue", PACKAGE / "scheduling", PACKAGE / "db" / "migrations.py")

_CREATED = re.compile(
    r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:UNLOGGED\s+)?"
    r"(TABLE|VIEW|MATERIALIZED\s+VIEW|SEQUENCE|FUNCTION|PROCEDURE)\s+"
    r"(?:IF\s+NOT\s+EXISTS\s+)?yuxi\.([a-z_][a-z0-9_]*)",
    re.IGNORECASE,
)
# yuxi.name or "yuxi"."name", not part of a longer dotted name (yuxi.models.registry)
_NAMED = re.compile(r'(?<![\w.])"?yuxi"?\.("?)([a-z_][a-z0-9_]*)\1(?![\w.])')
_KEYWORDS = re.compile(r"\b(?:SELECT|INSERT|UPDATE|DELETE|FROM|JOIN|CALL|TRUNCATE|MERGE|PERFORM)\b")
_LOWER_CASE_SQL = re.compile(
    r"\bselect\b.*\bfrom\b|\binsert\s+into\b|\bdelete\s+from\b|\bupdate\s+\S+\s+set\b",
    re.IGNORECASE | re.DOTALL,
)
_ARGUMENTS = re.compile(r"%\(\w+\)[sbt]|%[sbt]\b|=>")
# a call alone, its arguments written out or added ("yuxi.thread_runs" + _OWNED)
_ONLY_A_CALL = re.compile(r'\s*"?yuxi"?\."?[a-z_][a-z0-9_]*"?\s*(?:\(.*\)|\{\}.*)', re.DOTALL)


@dataclass(frozen=True)
class Schema:
    relations: frozenset[str]  # tables, views, sequences
    functions: frozenset[str]

    @property
    def names(self) -> frozenset[str]:
        return self.relations | self.functions


def read_schema(directory: Path = SCHEMA) -> Schema:
    relations: set[str] = {"schema_migrations"}  # the runner's ledger, created in Python
    functions: set[str] = set()
    for path in sorted(directory.glob("*.sql")):
        for kind, name in _CREATED.findall(path.read_text(encoding="utf-8")):
            (functions if kind.upper() in ("FUNCTION", "PROCEDURE") else relations).add(name)
    return Schema(frozenset(relations), frozenset(functions))


def sql_names(text: str, schema: Schema) -> list[str]:
    """The ``yuxi.`` tables and functions ``text`` names if it is SQL, else []."""
    named = [m.group(2) for m in _NAMED.finditer(text) if m.group(2) in schema.names]
    if not named:
        return []
    if _KEYWORDS.search(text) or _LOWER_CASE_SQL.search(text) or _ONLY_A_CALL.fullmatch(text):
        return named
    called = any(
        re.search(rf'"?yuxi"?\."?{name}"?\s*\(', text) for name in named if name in schema.functions
    )
    return named if called and _ARGUMENTS.search(text) else []


def _documentation(tree: ast.AST) -> set[int]:
    """ids of the string constants that are bare statements: docstrings, notes."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def _is_sum(node: ast.AST) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)


def _added(node: ast.AST) -> list[ast.expr]:
    """The operands of ``a + b + …`` (none for anything else)."""
    if not isinstance(node, ast.BinOp) or not _is_sum(node):
        return []
    return [o for side in (node.left, node.right) for o in (_added(side) or [side])]


def _parts(node: ast.AST) -> list[ast.AST]:
    """The nodes whose text ``_text(node)`` already holds: the pieces of an f-string,
    the sums and string operands of ``a + b + …``."""
    if isinstance(node, ast.JoinedStr):
        return [v for v in node.values if isinstance(v, ast.Constant)]
    if not isinstance(node, ast.BinOp) or not _is_sum(node):
        return []
    parts: list[ast.AST] = []
    for side in (node.left, node.right):
        if _is_sum(side) or isinstance(side, (ast.Constant, ast.JoinedStr)):
            parts += [side, *_parts(side)]
    return parts


def _text(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(value) for value in node.values)
    return "{}"


def _texts(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string literal but documentation: an f-string as its text
    with ``{}`` for each replacement field, ``"…" + name`` likewise."""
    skip = _documentation(tree)
    texts: list[tuple[int, str]] = []
    for node in ast.walk(tree):  # outer nodes first
        if id(node) in skip:
            continue
        operands = _added(node)
        strings = [o for o in operands if isinstance(o, (ast.Constant, ast.JoinedStr))]
        if strings and isinstance(node, ast.expr):
            texts.append((node.lineno, "".join(_text(o) for o in operands)))
            skip.update(id(part) for part in _parts(node))
        elif isinstance(node, ast.JoinedStr):
            texts.append((node.lineno, _text(node)))
            skip.update(id(part) for part in _parts(node))
        elif isinstance(node, ast.Call) and _callee(node) == "Identifier":
            pieces = [a.value for a in node.args if isinstance(a, ast.Constant)]
            if len(pieces) >= 2 and pieces[0] == "yuxi" and isinstance(pieces[1], str):
                texts.append((node.lineno, f"SELECT yuxi.{pieces[1]}"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            texts.append((node.lineno, node.value))
    return sorted(texts)


def _callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def offences(source: str, schema: Schema) -> list[tuple[int, list[str], str]]:
    """(line, names, text) of each SQL string in ``source`` that names schema ``yuxi``."""
    found = []
    for line, text in _texts(ast.parse(source)):
        names = sql_names(text, schema)
        if names:
            found.append((line, names, text))
    return found


def _outside_the_wrapper_layer() -> list[Path]:
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if not any(path == allowed or allowed in path.parents for allowed in WRAPPER_LAYER)
    ]


def test_no_sql_on_schema_yuxi_outside_the_wrapper_layer() -> None:
    schema = read_schema()
    assert {"users", "mcp_servers", "knowledge_bases"} <= schema.relations, schema.relations
    assert {"run_check_lease", "kb_vector_status"} <= schema.functions
    files = _outside_the_wrapper_layer()
    assert PACKAGE / "cli" / "mcp.py" in files and PACKAGE / "queue" / "runs.py" not in files
    problems = [
        f"{path.relative_to(ROOT)}:{line}: SQL on {', '.join(f'yuxi.{n}' for n in names)}"
        f" ({' '.join(text.split())[:100]!r})"
        for path in files
        for line, names, text in offences(path.read_text(encoding="utf-8"), schema)
    ]
    assert not problems, (
        "SQL on schema yuxi outside yuxi/queue/ and yuxi/scheduling/: make it a SQL function"
        " in sql/schema/ and call it through its wrapper in yuxi/queue/<noun>.py\n"
        + "\n".join(problems)
    )


_SCHEMA = Schema(frozenset({"users", "mcp_servers"}), frozenset({"user_list", "run_check_lease"}))


@pytest.mark.parametrize(
    "source",
    [
        'conn.execute("SELECT id FROM yuxi.users WHERE name = %s", (name,))',
        'conn.execute("select id from yuxi.users where name = %s", (name,))',
        'conn.execute(\n    "SELECT id FROM"\n    " yuxi.users"\n)',
        'conn.execute(f"UPDATE yuxi.mcp_servers SET {kind}_sealed = %s")',
        'conn.execute(f"SELECT id, {kind}_sealed FROM yuxi.mcp_servers")',
        'call_many(conn, Row, "yuxi.user_list()", {})',
        'call_many(conn, Row, "yuxi.user_list" + _OWNED, {})',
        'call_many(conn, Row, f"yuxi.user_list{_OWNED}", {})',
        'conn.execute("SELECT * FROM " + "yuxi.users")',
        'call_scalar(conn, "yuxi.run_check_lease(p_run_id => %(run_id)s)", {})',
        'conn.execute(\'SELECT * FROM "yuxi"."users"\')',
        'sql.SQL("SELECT * FROM {}").format(sql.Identifier("yuxi", "users"))',
    ],
)
def test_sql_naming_schema_yuxi_is_found(source: str) -> None:
    assert offences(source, _SCHEMA), source


@pytest.mark.parametrize(
    "source",
    [
        'def f():\n    """``yuxi.user_list`` lists users: SELECT * FROM yuxi.users."""',
        '"""The module: ``yuxi.run_check_lease`` FROM a tool call."""',
        "# SELECT id FROM yuxi.users\nx = 1",
        'HELP = "Seconds this scrape spent reading yuxi.user_list()"',
        'log = logging.getLogger("yuxi.users")',
        'import_module("yuxi.users.extra")',
        'conn.execute("SELECT count(*) FROM procrastinate_workers")',
        'conn.execute("SELECT id FROM yuxi.unknown_thing")',
    ],
)
def test_prose_and_other_schemas_are_not_sql_on_yuxi(source: str) -> None:
    assert not offences(source, _SCHEMA), source
