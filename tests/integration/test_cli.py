"""The yuxi command, run as a real process."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

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


async def test_user_credit_tops_up_lowers_and_shows_the_ledger(world: World, db_url: str) -> None:
    env = {"YUXI_DATABASE_URL": db_url}
    shown = await asyncio.to_thread(_yuxi, "user", "credit", "alice", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "alice has no budget" in shown.stdout
    topped = await asyncio.to_thread(
        _yuxi, "user", "credit", "alice", "+25", "--reason", "pilot", env=env
    )
    assert topped.returncode == 0, topped.stderr
    assert "balance 25" in topped.stdout and "pilot" in topped.stdout
    lowered = await asyncio.to_thread(_yuxi, "user", "credit", "alice", "-5", env=env)
    assert lowered.returncode == 0, lowered.stderr
    assert "balance 20" in lowered.stdout
    overdrawn = await asyncio.to_thread(_yuxi, "user", "credit", "alice", "-21", env=env)
    assert overdrawn.returncode == 1 and "insufficient credits" in overdrawn.stderr
    for bad in ("lots", "NaN"):
        refused = await asyncio.to_thread(_yuxi, "user", "credit", "alice", bad, env=env)
        assert refused.returncode == 2 and "is not a number" in refused.stderr
    missing = await asyncio.to_thread(_yuxi, "user", "credit", "nobody", "5", env=env)
    assert missing.returncode == 1 and "user nobody not found" in missing.stderr
    assert await world.fetch("SELECT kind, delta::text FROM yuxi.credit_ledger ORDER BY id") == [
        ("topup", "25.00000000"),
        ("adjust", "-5.00000000"),
    ]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_up_serves_a_conversation_and_keeps_it_across_restarts(tmp_path: Path) -> None:
    """The acceptance path: `yuxi up` in a fresh YUXI_HOME, a user made with the CLI, a
    conversation over HTTP, SIGINT, a restart, the history intact."""
    port = _free_port()
    env = {**os.environ, "YUXI_HOME": str(tmp_path / "home"), "YUXI_PORT": str(port)}
    env.pop("YUXI_DATABASE_URL", None)
    base = f"http://127.0.0.1:{port}"

    log_path = tmp_path / "yuxi-up.log"

    def start() -> subprocess.Popen[str]:
        with log_path.open("a") as log:  # the child keeps its own copy of the descriptor
            return subprocess.Popen(
                [sys.executable, "-m", "yuxi.cli", "up"],
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=log,
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

    def wait_healthy(client: httpx.Client) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if client.get("/api/system/health").json()["workers"] >= 1:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError("yuxi up did not become healthy")

    first = start()
    try:
        assert read_until(first, "api: ") == base
        assert read_until(first, "console: ") == f"{base}/"
        admin_token = read_until(first, "admin token (shown once): ")
        assert admin_token.startswith("yx_")
        admin_link = read_until(first, "admin login link (single use, 15 minutes): ")
        assert admin_link.startswith(f"{base}/#login=")
        created = _yuxi(
            "user", "create", "dora", "--login-link", env={"YUXI_HOME": env["YUXI_HOME"]}
        )
        assert created.returncode == 0, created.stderr
        *_, link_line, token = created.stdout.strip().splitlines()
        assert link_line.startswith("login link (single use, 15 minutes): http://"), link_line
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as client:
            wait_healthy(client)
            # the console's login links: each code gives its user a new token, once
            for link, name in ((admin_link, "admin"), (link_line, "dora")):
                code = link.rsplit("#login=", 1)[1]
                login = client.post("/api/console/login", json={"code": code})
                assert login.status_code == 200, login.text
                assert login.json()["user"]["name"] == name
                again = client.post("/api/console/login", json={"code": code})
                assert again.status_code == 401
            thread = client.post("/api/chat/thread", json={"agent_id": "chatbot"}).json()["id"]
            submitted = client.post("/api/agent/runs", json={"thread_id": thread, "query": "ping"})
            assert submitted.status_code == 202
            run_id = submitted.json()["run_id"]
            deadline = time.monotonic() + 30
            while client.get(f"/api/agent/runs/{run_id}").json()["status"] != "completed":
                assert time.monotonic() < deadline, "the run did not complete"
                time.sleep(0.1)
    finally:
        stop(first)

    second = start()
    try:
        read_until(second, "api: ")
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as client:
            wait_healthy(client)
            history = client.get(f"/api/chat/thread/{thread}/history").json()
        assert [(m["role"], m["content"]) for m in history["history"]] == [
            ("user", "ping"),
            ("assistant", "echo: ping"),
        ]
        assert [r["status"] for r in history["runs"]] == ["completed"]
    finally:
        stop(second)

    # the log: an access line per request and the run's outcome, never a token, and
    # none of procrastinate's per-job lines at the default level
    log = log_path.read_text()
    assert "method=POST path=/api/agent/runs status=202" in log
    assert f"yuxi.worker: run {run_id}: completed" in log
    assert token not in log and admin_token not in log
    assert "procrastinate.worker" not in log


def test_sigterm_ends_open_streams_with_a_retry_hint_and_no_traceback(
    db_url: str, tmp_path: Path
) -> None:
    """`yuxi up` with a run executing and streams open on it and on its request: SIGTERM
    ends every stream with a `retry:` hint (clients resume on the next server), the
    worker releases the run, the process exits 0 and logs no traceback."""
    port = _free_port()
    env = {
        **os.environ,
        "YUXI_HOME": str(tmp_path / "home"),
        "YUXI_PORT": str(port),
        "YUXI_DATABASE_URL": db_url,
        "YUXI_SHUTDOWN_GRACE_SECONDS": "1",
    }
    created = _yuxi("user", "create", "erin", env=env)
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip().splitlines()[-1]
    log_path = tmp_path / "up.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "yuxi.cli", "up"], env=env, stdout=log, stderr=log
        )
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=base, headers=headers, timeout=10) as client:
            deadline = time.monotonic() + 60
            while True:
                with contextlib.suppress(httpx.TransportError):
                    if client.get("/api/system/health").json()["workers"] >= 1:
                        break
                assert time.monotonic() < deadline, "yuxi up did not become healthy"
                time.sleep(0.1)
            thread = client.post("/api/chat/thread", json={"agent_id": "chatbot"}).json()["id"]
            info = client.post(
                "/api/agent/runs", json={"thread_id": thread, "query": "/sleep 30"}
            ).json()
            deadline = time.monotonic() + 30
            while client.get(f"/api/agent/runs/{info['run_id']}").json()["status"] != "running":
                assert time.monotonic() < deadline, "the run did not start"
                time.sleep(0.05)
        paths = [f"/api/agent/runs/{info['run_id']}/events"] * 8 + [
            f"/api/agent/requests/{info['request_id']}/events"
        ]
        with concurrent.futures.ThreadPoolExecutor(len(paths)) as pool:
            opened = threading.Barrier(len(paths) + 1)

            def follow(path: str) -> str:
                with (
                    httpx.Client(base_url=base, headers=headers, timeout=60) as client,
                    client.stream("GET", path) as response,
                ):
                    assert response.status_code == 200
                    opened.wait()
                    return "".join(response.iter_text())

            streams = [pool.submit(follow, path) for path in paths]
            opened.wait(timeout=30)
            time.sleep(0.3)  # every stream is waiting for news
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=30)
            assert code == 0, (code, log_path.read_text()[-3000:])
            bodies = [stream.result(timeout=30) for stream in streams]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    for body in bodies:
        assert body.replace("\r\n", "\n").rstrip("\n").endswith("retry: 500"), body[-200:]
        assert "data: \n\n" not in body.replace("\r\n", "\n")  # no empty message event
    log = log_path.read_text()
    assert "Traceback" not in log and "CancelledError" not in log, log[-2000:]
