"""The run state machine: RUN_TRANSITIONS (yuxi/queue/statuses.py), the SQL that the
guard trigger applies, and the diagram in docs/queue.md are one table.

Each of the 7x7 (from, to) pairs gets a run of its own, put in `from` through the SQL
functions, then a raw ``UPDATE yuxi.agent_runs SET status = to`` from a plain
connection, as typed at a psql prompt. The update also sets what the table's CHECK
constraints and the guard require of the target status, so that what is tested is the
transition and not a side condition:

- a leased status (running, cancel_requested) has a lease token and expiry, and no
  other status has them;
- every status but the active ones has finished_at;
- completed names an assistant message of the same run as its output (one is stored
  for every run beforehand);
- a final run's outcome (finished_at, output, error) is left as it is, since rewriting
  it is refused on its own.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row

from tests.conftest import database_url
from yuxi.queue.statuses import (
    ACTIVE_RUN_STATUSES,
    FINAL_RUN_STATUSES,
    LEASED_RUN_STATUSES,
    RUN_TRANSITIONS,
    DeliveryStatus,
    OccurrenceStatus,
    RequestStatus,
    RunStatus,
    run_transition_allowed,
)

Conn = psycopg.Connection[dict[str, Any]]

_QUEUE_DOC = Path(__file__).resolve().parents[2] / "docs" / "queue.md"


@pytest.fixture(scope="module")
def psql_url(pg_server_url: str, template_database: str) -> Iterator[str]:
    """One migrated database for the module; each case uses a thread of its own."""
    name = f"yuxi_rt_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_database)
            )
        )
    url = database_url(pg_server_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT yuxi.user_create('alice', false, %s)", (hashlib.sha256(b"alice").digest(),)
        )
        conn.execute(
            "SELECT yuxi.agent_seed('chatbot', 'Chatbot', 'chatbot',"
            """ '{"context": {"model": "builtin:scripted"}}')"""
        )
    try:
        yield url
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
def psql(psql_url: str) -> Iterator[Conn]:
    """A plain autocommit connection: every statement is its own transaction."""
    with psycopg.connect(psql_url, autocommit=True, row_factory=dict_row) as conn:
        yield conn


def _one(conn: Conn, query: str, *params: Any) -> dict[str, Any]:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return row


def _run_in(conn: Conn, status: RunStatus) -> uuid.UUID:
    """A run in `status`, reached through the functions that normally get it there."""
    uid = _one(conn, "SELECT id FROM yuxi.users WHERE name = 'alice'")["id"]
    thread = _one(conn, "SELECT thread_id FROM yuxi.thread_create(%s, 'chatbot')", uid)
    run_id: uuid.UUID = _one(
        conn, "SELECT run_id FROM yuxi.request_submit(%s, %s, 'x')", uid, thread["thread_id"]
    )["run_id"]
    if status == RunStatus.CANCELLED:
        conn.execute("SELECT yuxi.run_request_cancel(%s)", (run_id,))
    elif status != RunStatus.PENDING:
        token = _one(conn, "SELECT lease_token FROM yuxi.run_claim(%s, 'w', 600)", run_id)
        if status == RunStatus.CANCEL_REQUESTED:
            conn.execute("SELECT yuxi.run_request_cancel(%s)", (run_id,))
        elif status != RunStatus.RUNNING:
            messages = (
                '[{"role": "assistant", "content": "done"}]'
                if status == RunStatus.COMPLETED
                else "[]"
            )
            conn.execute(
                "SELECT yuxi.run_finish(%s, %s, %s, %s::jsonb)",
                (run_id, token["lease_token"], status.value, messages),
            )
    assert _one(conn, "SELECT status FROM yuxi.agent_runs WHERE run_id = %s", run_id) == {
        "status": status.value
    }
    return run_id


# What a raw UPDATE to %(to)s sets besides the status (see the module docstring).
_UPDATE = """
    UPDATE yuxi.agent_runs SET
        status = %(to)s,
        lease_token = CASE WHEN %(leased)s THEN coalesce(lease_token, gen_random_uuid()) END,
        lease_expires_at = CASE WHEN %(leased)s
                                THEN coalesce(lease_expires_at, now() + interval '1 hour') END,
        finished_at = CASE WHEN NOT %(active)s THEN coalesce(finished_at, now()) END,
        output_message_id = CASE WHEN %(to)s = 'completed'
                                 THEN coalesce(output_message_id, %(output)s)
                                 ELSE output_message_id END
    WHERE run_id = %(run_id)s
"""

_PAIRS = [(old, new) for old in RunStatus for new in RunStatus]


@pytest.mark.parametrize(("old", "new"), _PAIRS, ids=[f"{o}->{n}" for o, n in _PAIRS])
def test_a_raw_update_is_allowed_exactly_as_the_table_says(
    psql: Conn, old: RunStatus, new: RunStatus
) -> None:
    run_id = _run_in(psql, old)
    output = _one(
        psql,
        "INSERT INTO yuxi.messages (thread_id, role, content, run_id)"
        " SELECT thread_id, 'assistant', 'output', run_id FROM yuxi.agent_runs"
        " WHERE run_id = %s RETURNING id",
        run_id,
    )["id"]
    params = {
        "to": new.value,
        "leased": new in LEASED_RUN_STATUSES,
        "active": new in ACTIVE_RUN_STATUSES,
        "output": output,
        "run_id": run_id,
    }
    if run_transition_allowed(old, new):
        assert psql.execute(_UPDATE, params).rowcount == 1
        expected = new
    else:
        with pytest.raises(psycopg.Error, match=f"cannot go from {old} to {new}") as refused:
            psql.execute(_UPDATE, params)
        assert refused.value.sqlstate == "YT001"
        expected = old
    after = _one(psql, "SELECT status FROM yuxi.agent_runs WHERE run_id = %s", run_id)
    assert after["status"] == expected


def test_the_sql_predicates_and_transition_function_agree_with_python(psql: Conn) -> None:
    for status in RunStatus:
        row = _one(
            psql,
            "SELECT yuxi.run_is_active(%s) AS active, yuxi.run_is_leased(%s) AS leased,"
            " yuxi.run_is_final(%s) AS final",
            *[status.value] * 3,
        )
        assert row == {
            "active": status in ACTIVE_RUN_STATUSES,
            "leased": status in LEASED_RUN_STATUSES,
            "final": status in FINAL_RUN_STATUSES,
        }, status
        for new in RunStatus:
            if new != status:
                allowed = _one(
                    psql, "SELECT yuxi.run_transition_allowed(%s, %s) AS ok", status, new
                )["ok"]
                assert allowed == (new in RUN_TRANSITIONS[status]), (status, new)


@pytest.mark.parametrize(
    ("function", "enum"),
    [
        ("yuxi.run_status_is_valid", RunStatus),
        ("yuxi.request_status_is_valid", RequestStatus),
        ("yuxi.delivery_status_is_valid", DeliveryStatus),
        ("yuxi.occurrence_status_is_valid", OccurrenceStatus),
    ],
)
def test_each_status_vocabulary_lists_the_python_enum(
    psql: Conn, function: str, enum: type[StrEnum]
) -> None:
    definition = _one(psql, "SELECT pg_get_functiondef(%s::regproc) AS d", function)["d"]
    assert set(re.findall(r"'([a-z_]+)'", definition)) == {member.value for member in enum}
    for member in enum:
        assert _one(psql, f"SELECT {function}(%s) AS ok", member.value)["ok"] is True


def _run_section() -> str:
    return _QUEUE_DOC.read_text().split("\n### Run\n", 1)[1].split("\n## ", 1)[0]


def _diagram_transitions() -> set[tuple[str, str]]:
    diagram = _run_section().split("```mermaid\n", 1)[1].split("```", 1)[0]
    return {
        (match.group(1), match.group(2))
        for match in re.finditer(r"^\s*([a-z_]+) --> ([a-z_]+)\b", diagram, re.MULTILINE)
    }


def _table_transitions() -> set[tuple[str, str]]:
    table = _run_section().split("| from | to |", 1)[1].split("\n\n", 1)[0]
    pairs: set[tuple[str, str]] = set()
    for row in table.splitlines()[2:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        old = cells[0].strip("`")
        pairs |= {(old, new) for new in re.findall(r"`([a-z_]+)`", cells[1])}
    return pairs


_TABLE = {(old.value, new.value) for old, targets in RUN_TRANSITIONS.items() for new in targets}


def test_the_diagram_in_docs_queue_md_draws_exactly_the_table() -> None:
    assert _diagram_transitions() == _TABLE


def test_the_table_in_docs_queue_md_lists_exactly_the_table() -> None:
    assert _table_transitions() == _TABLE
