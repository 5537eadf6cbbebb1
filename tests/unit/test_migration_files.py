from __future__ import annotations

from pathlib import Path

import pytest

from yuxi.db.migrations import (
    BASELINE,
    MigrationError,
    baseline_sql,
    load_migrations,
    load_schema,
    main,
)


def test_the_shipped_migrations_are_numbered_without_gaps() -> None:
    names = [m.name for m in load_migrations()]
    assert names[0] == BASELINE
    assert [int(name[:4]) for name in names] == list(range(1, len(names) + 1))


def test_the_baseline_generator_concatenates_sql_schema_in_order(tmp_path: Path) -> None:
    (tmp_path / "01_b.sql").write_text("SELECT 2;\n")
    (tmp_path / "00_a.sql").write_text("SELECT 1;\n")
    text = baseline_sql(tmp_path)
    assert text.startswith("-- yuxi: the baseline, generated from sql/schema/")
    assert text.index("-- sql/schema/00_a.sql\n\nSELECT 1;\n") < text.index(
        "-- sql/schema/01_b.sql\n\nSELECT 2;\n"
    )


def test_sql_schema_files_are_numbered_nouns() -> None:
    names = [name for name, _text in load_schema()]
    assert names[0] == "00_vocabulary.sql" and len(names) > 10
    assert all(name[:2].isdigit() and name[2] == "_" for name in names), names


def test_the_baseline_command_prints_the_baseline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["baseline"]) == 0
    assert capsys.readouterr().out == baseline_sql()
    assert main([]) == 2


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
