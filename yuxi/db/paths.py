"""Where the SQL files are: the source tree, or inside an installed wheel."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


def sql_dir() -> Path:
    """The ``sql/`` directory (``yuxi/_sql`` in a built wheel)."""
    for candidate in (_PACKAGE.parent / "sql", _PACKAGE / "_sql"):
        if (candidate / "migrations").is_dir():
            return candidate
    raise FileNotFoundError("yuxi's sql/migrations directory is missing from this installation")


def migrations_dir() -> Path:
    """``sql/migrations/``: the numbered deltas the migration runner applies."""
    return sql_dir() / "migrations"


def schema_dir() -> Path:
    """``sql/schema/``: the current definition of schema ``yuxi``, one file per noun."""
    return sql_dir() / "schema"
