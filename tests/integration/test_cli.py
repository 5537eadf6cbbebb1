"""The yuxi command, run as a real process."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from tests.integration.conftest import World


def _yuxi(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "yuxi.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_user_create_prints_a_token_stored_only_as_its_hash(
    world: World, db_url: str
) -> None:
    result = await asyncio.to_thread(
        _yuxi, "user", "create", "carol", "--admin", env={"YUXI_DATABASE_URL": db_url}
    )
    assert result.returncode == 0, result.stderr
    token = result.stdout.strip().splitlines()[-1]
    assert token.startswith("yx_") and len(token) > 40
    rows = await world.fetch(
        "SELECT u.is_admin, t.token_hash FROM yuxi.users u"
        " JOIN yuxi.api_tokens t ON t.user_id = u.id"
        " WHERE u.name = 'carol'"
    )
    assert rows == [(True, hashlib.sha256(token.encode()).digest())]
    again = await asyncio.to_thread(
        _yuxi, "user", "create", "carol", env={"YUXI_DATABASE_URL": db_url}
    )
    assert again.returncode == 1 and "user carol already exists" in again.stderr


def test_up_runs_a_conversation_and_keeps_it_across_restarts(tmp_path: Path) -> None:
    env = {**os.environ, "YUXI_HOME": str(tmp_path / "home"), "YUXI_MAINTENANCE_SECONDS": "1"}
    env.pop("YUXI_DATABASE_URL", None)

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "yuxi.cli", "up"],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )

    def read_until(process: subprocess.Popen[str], prefix: str) -> str:
        assert process.stdout is not None
        while True:
            line = process.stdout.readline()
            assert line, f"yuxi up exited before printing {prefix!r}"
            if line.startswith(prefix):
                return line[len(prefix) :].strip()

    def stop(process: subprocess.Popen[str]) -> None:
        process.send_signal(signal.SIGINT)
        try:
            assert process.wait(timeout=60) == 0
        finally:
            if process.stdout is not None:
                process.stdout.close()

    first = start()
    try:
        url = read_until(first, "database: ")
        token = read_until(first, "admin token (shown once): ")
        assert token.startswith("yx_")
        with psycopg.connect(url, autocommit=True) as conn:
            uid = conn.execute("SELECT id FROM yuxi.users WHERE name = 'admin'").fetchone()[0]  # type: ignore[index]
            thread = conn.execute(
                "SELECT thread_id FROM yuxi.thread_create(%s, 'chatbot')", (uid,)
            ).fetchone()[0]  # type: ignore[index]
            run_id = conn.execute(
                "SELECT run_id FROM yuxi.request_submit(%s, %s, 'ping')", (uid, thread)
            ).fetchone()[0]  # type: ignore[index]
            deadline = time.monotonic() + 30
            status = None
            while time.monotonic() < deadline:
                status = conn.execute(
                    "SELECT status FROM yuxi.agent_runs WHERE run_id = %s", (run_id,)
                ).fetchone()[0]  # type: ignore[index]
                if status == "completed":
                    break
                time.sleep(0.1)
            assert status == "completed"
    finally:
        stop(first)

    second = start()
    try:
        url = read_until(second, "database: ")
        with psycopg.connect(url, autocommit=True) as conn:
            replies = conn.execute(
                "SELECT content FROM yuxi.messages WHERE thread_id = %s AND role = 'assistant'",
                (thread,),
            ).fetchall()
            admins = conn.execute("SELECT count(*) FROM yuxi.users").fetchone()
        assert replies == [("echo: ping",)]
        assert admins == (1,)  # no second admin on restart
    finally:
        stop(second)
