from __future__ import annotations

from pathlib import Path

import pytest

from yuxi.db.migrations import MigrationError, load_migrations


def test_the_shipped_migrations_are_numbered_without_gaps() -> None:
    names = [m.name for m in load_migrations()]
    assert names[0] == "0001_schema.sql"
    assert [int(name[:4]) for name in names] == list(range(1, len(names) + 1))


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (["0001_a.sql", "0003_c.sql"], "expected migration number 0002"),
        (["0001_a.sql", "0001_b.sql"], "expected migration number 0002"),
        (["1_a.sql"], "named NNNN_lowercase_name.sql"),
        (["0001_Bad-Name.sql"], "named NNNN_lowercase_name.sql"),
    ],
)
def test_misnamed_or_missing_migrations_are_refused(
    tmp_path: Path, files: list[str], message: str
) -> None:
    for name in files:
        (tmp_path / name).write_text("SELECT 1;")
    with pytest.raises(MigrationError, match=message):
        load_migrations(tmp_path)


def test_checksums_change_with_content(tmp_path: Path) -> None:
    path = tmp_path / "0001_a.sql"
    path.write_text("SELECT 1;")
    first = load_migrations(tmp_path)[0].checksum
    path.write_text("SELECT 2;")
    assert load_migrations(tmp_path)[0].checksum != first
