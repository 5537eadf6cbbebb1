"""The README's curl walkthrough, run with bash against a real ``yuxi up``.

The blocks marked ``<!-- walkthrough -->`` run in order in one bash (``-euo
pipefail``), from the repository's root, as a reader pastes them into a second terminal
while ``uv run yuxi up`` runs in the first. Each ``# → …`` comment is what the README
says the command above it prints: its pieces between ``…`` must appear in the output,
in the order the README gives them.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.docs.conftest import ROOT
from tests.docs.markdown import CodeBlock, read_blocks

README = ROOT / "README.md"
MARKER = "walkthrough"
EXPECTED = "# → "


def walkthrough() -> list[CodeBlock]:
    blocks = [
        b
        for b in read_blocks(README, frozenset({MARKER}))
        if b.marker is not None and b.marker.name == MARKER
    ]
    assert blocks, f"no <!-- {MARKER} --> block in {README}"
    for block in blocks:
        assert block.info == "sh", f"README.md:{block.line}: a walkthrough block is ```sh"
    return blocks


def expected_output(blocks: list[CodeBlock]) -> list[list[str]]:
    """Each ``# → a … b`` line as its pieces ``[a, b]``."""
    lines = [
        line.strip().removeprefix(EXPECTED)
        for block in blocks
        for line in block.text.splitlines()
        if line.strip().startswith(EXPECTED)
    ]
    return [[piece.strip() for piece in line.split("…") if piece.strip()] for line in lines]


def assert_printed_in_order(output: str, expected: list[list[str]]) -> None:
    position = 0
    for pieces in expected:
        for piece in pieces:
            found = output.find(piece, position)
            assert found >= 0, (
                f"the README says {piece!r} is printed (in {' … '.join(pieces)!r}),"
                f" not found after position {position} of:\n{output}"
            )
            position = found + len(piece)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _yuxi_command() -> list[str]:
    """The ``yuxi`` script ``uv run yuxi`` runs: the one installed next to this Python."""
    script = Path(sys.executable).with_name("yuxi")
    return [str(script)] if script.exists() else [sys.executable, "-m", "yuxi.cli"]


@pytest.fixture
def yuxi_up(db_url: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """``yuxi up`` on a fresh database and a free port; yields the walkthrough's env."""
    port = _free_port()
    env = {
        **os.environ,
        "YUXI_HOME": str(tmp_path / "home"),
        "YUXI_DATABASE_URL": db_url,
        "YUXI_PORT": str(port),
        # the walkthrough's `uv run` must not re-lock or re-sync the environment this
        # test runs in; it runs the installed yuxi as it is
        "UV_NO_SYNC": "1",
    }
    log_path = tmp_path / "yuxi-up.log"
    with log_path.open("w") as log:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            [*_yuxi_command(), "up"], env=env, stdout=subprocess.PIPE, stderr=log, text=True
        )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_forward, args=(process, lines), daemon=True).start()
    try:
        printed: list[str] = []
        deadline = time.monotonic() + 60
        while not any(line.startswith("admin token (shown once): yx_") for line in printed):
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"yuxi up printed no admin token: {printed}") from None
            assert line, f"yuxi up exited early: {printed}\n{log_path.read_text()}"
            printed.append(line)
        assert f"api: http://127.0.0.1:{port}\n" in printed, printed
        _wait_for_a_worker(f"http://127.0.0.1:{port}")
        yield env
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _forward(process: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
    """Hands each line yuxi up prints to the test, then "" when it exits, so the test
    can wait with a deadline instead of blocking on a read."""
    assert process.stdout is not None
    with process.stdout:
        for line in process.stdout:
            lines.put(line)
    lines.put("")


def _wait_for_a_worker(base: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/api/system/health").json()["workers"] >= 1:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("yuxi up did not report a worker")


def test_the_front_door_commands_are_the_first_block() -> None:
    first = read_blocks(README, frozenset())[0]
    commands = [line.split("#")[0].strip() for line in first.text.splitlines()]
    assert commands == ["uv run yuxi up", "uv run pytest"]


def test_every_expected_line_has_something_to_find() -> None:
    expected = expected_output(walkthrough())
    assert len(expected) >= 8
    assert all(expected), "a `# →` line with nothing to look for"


def test_the_walkthrough_runs_as_the_readme_says(yuxi_up: dict[str, str], tmp_path: Path) -> None:
    for tool in ("bash", "curl", "python3", "uv"):
        if shutil.which(tool) is None:
            pytest.skip(f"the walkthrough needs {tool}")
    blocks = walkthrough()
    script = tmp_path / "walkthrough.sh"
    script.write_text("".join(block.text for block in blocks))
    result = subprocess.run(
        ["bash", "-euo", "pipefail", str(script)],
        cwd=ROOT,
        env=yuxi_up,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert_printed_in_order(result.stdout, expected_output(blocks))
    # what the walkthrough is for, whatever its `# →` lines say
    for reply in ("echo: hello", "interrupted", "you answered: Ada", "cancelled"):
        assert reply in result.stdout, result.stdout
