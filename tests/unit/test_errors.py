from __future__ import annotations

import re

from yuxi.db.paths import migrations_dir
from yuxi.queue import errors


def test_every_sqlstate_in_the_sql_has_a_typed_error() -> None:
    text = "".join(path.read_text() for path in migrations_dir().glob("*.sql"))
    raised = set(re.findall(r"ERRCODE = '(Y[A-Z]\d{3})', HINT = '([a-z_]+)'", text))
    assert raised, "no yuxi error codes found in the migrations"
    for sqlstate, hint in raised:
        cls = errors.BY_SQLSTATE[sqlstate]
        assert cls.code == hint, (sqlstate, hint, cls)


def test_contract_conflict_codes_exist() -> None:
    codes = {cls.code for cls in errors.BY_SQLSTATE.values()}
    assert {
        "request_id_conflict",
        "run_interrupted",
        "run_busy",
        "resume_superseded",
        "run_not_interrupted",
        "request_already_dispatched",
        "steer_already_pending",
        "run_not_steerable",
        "queue_not_paused",
    } <= codes
