"""`yuxi --help` and usage errors answer at once: the CLI imports the driver, the API,
the worker and the agent stack only in the commands that use them."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("psycopg", "msgspec", "langchain", "langgraph", "litestar", "procrastinate", "uvicorn")

PROBE = """
import sys
from click.testing import CliRunner
from yuxi.cli import main
result = CliRunner().invoke(main, sys.argv[2:])
assert result.exit_code in (0, 2), result.output
heavy = sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1].split(',')))
print(','.join(heavy))
"""


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["user", "--help"],
        ["agent", "create", "--help"],
        ["queue", "show", "--help"],
        ["db", "--help"],
        ["up", "--help"],
        ["no-such-command"],
    ],
    ids=" ".join,
)
def test_help_and_usage_errors_import_nothing_heavy(args: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(HEAVY), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"yuxi {' '.join(args)} imported {result.stdout.strip()}"
