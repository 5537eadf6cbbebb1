"""The console's files as shipped: no inline script or style, no HTML built from
strings, nothing loaded from another origin, every panel listed, all in the wheel."""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from yuxi.api.routes.console import CONSOLE_DIR

OWN_SCRIPTS = sorted(
    path
    for path in CONSOLE_DIR.rglob("*.js")
    if "vendor" not in path.relative_to(CONSOLE_DIR).parts
)


def test_the_console_has_no_inline_script_or_style_and_builds_no_html() -> None:
    html = (CONSOLE_DIR / "index.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)", html), "no inline script"
    assert " style=" not in html and "<style" not in html
    assert OWN_SCRIPTS, CONSOLE_DIR
    for path in OWN_SCRIPTS:
        text = path.read_text()
        for banned in ("innerHTML", "outerHTML", "insertAdjacentHTML", "eval(", "new Function"):
            assert banned not in text, f"{path.name} uses {banned}"
        assert not re.search(r"https?://(?!www\.w3\.org)", text), (
            f"{path.name} loads from elsewhere"
        )


def test_every_panel_module_is_listed() -> None:
    index = (CONSOLE_DIR / "panels" / "index.js").read_text()
    for path in sorted((CONSOLE_DIR / "panels").glob("*.js")):
        if path.name != "index.js":
            assert f'from "./{path.name}"' in index, path.name


def test_the_wheel_ships_the_console(tmp_path: Path) -> None:
    """hatch packages every file under yuxi/, the console's static files included."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    root = Path(__file__).resolve().parents[2]
    built = subprocess.run(
        [uv, "build", "--wheel", "--no-build-logs", "--out-dir", str(tmp_path), str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in [
        CONSOLE_DIR / "index.html",
        *OWN_SCRIPTS,
        CONSOLE_DIR / "vendor" / "marked.esm.js",
    ]:
        assert f"yuxi/api/console/{path.relative_to(CONSOLE_DIR).as_posix()}" in names
