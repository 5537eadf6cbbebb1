"""The app builds and imports cleanly: warnings are errors in this test suite."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

from yuxi.settings import Settings


def test_api_imports_without_warnings() -> None:
    """Once failed: routes/runs.py used litestar's deprecated Parameter(query=...)."""
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", "import yuxi.api.app"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_app_builds_without_warnings(tmp_path: Path) -> None:
    """Once failed: handlers inferred the `user` dependency (LitestarDeprecationWarning)."""
    from yuxi.api.app import create_app

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        create_app("postgresql:///unused", Settings(home=tmp_path))
