"""The read functions that Python calls instead of selecting from tables:
yuxi.project_list, yuxi.job_get, yuxi.job_list. Called as from psql."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

Conn = psycopg.Connection[dict[str, Any]]


@pytest.fixture
def psql(db_url: str) -> Iterator[Conn]:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute(
            """SELECT yuxi.agent_seed('chatbot', 'Chatbot', 'chatbot', '{"context": {}}')"""
        )
        yield conn


def _user(conn: Conn, name: str) -> uuid.UUID:
    row = conn.execute(
        "SELECT yuxi.user_create(%s, false, %s) AS id",
        (name, hashlib.sha256(name.encode()).digest()),
    ).fetchone()
    assert row is not None
    return row["id"]  # type: ignore[no-any-return]


def _project(conn: Conn, uid: uuid.UUID, name: str) -> uuid.UUID:
    row = conn.execute(
        "SELECT id FROM yuxi.project_create(%s, %s, %s)", (uid, name, f"/tmp/{name}")
    ).fetchone()
    assert row is not None
    return row["id"]  # type: ignore[no-any-return]


def _job(conn: Conn, uid: uuid.UUID, project: uuid.UUID) -> uuid.UUID:
    row = conn.execute(
        "SELECT id FROM yuxi.job_create(%s, %s, 'chatbot', 'hi', 'auto', '0 * * * *', 'UTC',"
        " true, now() + interval '1 hour')",
        (uid, project),
    ).fetchone()
    assert row is not None
    return row["id"]  # type: ignore[no-any-return]


def test_project_list_is_the_users_live_projects_oldest_first(psql: Conn) -> None:
    alice, bob = _user(psql, "alice"), _user(psql, "bob")
    first, second, gone = (_project(psql, alice, name) for name in ("a1", "a2", "a3"))
    _project(psql, bob, "b1")
    psql.execute("UPDATE yuxi.projects SET deleted_at = now() WHERE id = %s", (gone,))
    rows = psql.execute("SELECT * FROM yuxi.project_list(%s)", (alice,)).fetchall()
    assert [row["id"] for row in rows] == [first, second]
    table = psql.execute("SELECT * FROM yuxi.projects WHERE id = %s", (first,)).fetchone()
    assert rows[0] == table


def test_job_list_and_job_get_return_the_table_row(psql: Conn) -> None:
    alice, bob = _user(psql, "alice"), _user(psql, "bob")
    project = _project(psql, alice, "p")
    first, second, deleted = (_job(psql, alice, project) for _ in range(3))
    _job(psql, bob, _project(psql, bob, "q"))
    psql.execute("SELECT yuxi.job_delete(%s, %s)", (alice, deleted))

    listed = psql.execute("SELECT * FROM yuxi.job_list(%s)", (alice,)).fetchall()
    assert [row["id"] for row in listed] == [first, second]
    table = psql.execute("SELECT * FROM yuxi.scheduled_agent_jobs WHERE id = %s", (first,))
    assert listed[0] == table.fetchone()
    got = psql.execute("SELECT * FROM yuxi.job_get(%s, %s)", (alice, second)).fetchone()
    assert got == listed[1]
    # an operator (p_uid NULL) sees any user's live job
    assert psql.execute("SELECT id FROM yuxi.job_get(NULL, %s)", (first,)).fetchone() == {
        "id": first
    }


@pytest.mark.parametrize("case", ["missing", "deleted", "other user's"])
def test_job_get_of_a_job_the_user_cannot_see_is_not_found(psql: Conn, case: str) -> None:
    alice, bob = _user(psql, "alice"), _user(psql, "bob")
    job = _job(psql, alice, _project(psql, alice, "p"))
    caller = alice
    if case == "missing":
        job = uuid.uuid4()
    elif case == "deleted":
        psql.execute("SELECT yuxi.job_delete(%s, %s)", (alice, job))
    else:
        caller = bob
    with pytest.raises(psycopg.Error, match=f"scheduled job {job} not found") as caught:
        psql.execute("SELECT * FROM yuxi.job_get(%s, %s)", (caller, job))
    assert caught.value.sqlstate == "YN001"
