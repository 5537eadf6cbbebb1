"""One server key for every host of a database (yuxi/models/server_key.py): the first
process records its key's identifier, a process with another key is refused with a
message that says what to do (never the key), racing first processes agree, and a
rotation starts with the old key among the previous ones and records the new one once
everything is re-sealed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from psycopg import AsyncConnection

from tests.integration.conftest import World
from tests.integration.racing import failures, race, successes
from yuxi.models.secret_box import SecretBox, new_key, server_key_id
from yuxi.models.secret_box import _decode_key as decode_key
from yuxi.models.server_key import MISMATCH, ServerKeyMismatch, server_key_verify

MODEL_KEY = "sk-rotation-0123456789-LAST"


def _env(db_url: str, home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("YUXI_SECRET_KEY")}
    return {**env, "YUXI_DATABASE_URL": db_url, "YUXI_HOME": str(home), **extra}


def _yuxi(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "yuxi.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def _worker_starts(env: dict[str, str]) -> str:
    """Starts `yuxi worker`; once it says it runs, stops it; its stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "yuxi.cli", "worker", env=env, stderr=asyncio.subprocess.PIPE
    )
    assert process.stderr is not None
    seen = b""
    try:
        async with asyncio.timeout(60):
            while b"worker running" not in seen:
                line = await process.stderr.readline()
                assert line, f"the worker exited: {seen.decode()}"
                seen += line
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        seen += await process.stderr.read()
        await asyncio.wait_for(process.wait(), 60)
    return seen.decode()


async def _recorded(world: World) -> Any:
    return await world.value("SELECT key_id FROM yuxi.server_key")


async def test_a_host_with_another_key_is_refused_and_the_same_key_starts(
    world: World, db_url: str, tmp_path: Path
) -> None:
    # two hosts without YUXI_SECRET_KEY: each generates its own <YUXI_HOME>/secret.key
    first = _env(db_url, tmp_path / "first")
    started = await _worker_starts(first)
    assert "recorded this server key's identifier" in started
    key = (tmp_path / "first" / "secret.key").read_text().strip()
    assert await _recorded(world) == server_key_id(decode_key(key, "key"))

    second = _env(db_url, tmp_path / "second")
    refused = await asyncio.to_thread(_yuxi, "worker", env=second)
    assert refused.returncode == 1, refused.stderr
    assert MISMATCH in " ".join(refused.stderr.split())
    assert "YUXI_SECRET_KEY" in refused.stderr and "Traceback" not in refused.stderr
    other = (tmp_path / "second" / "secret.key").read_text().strip()
    for secret in (key, other):
        assert secret not in refused.stderr + refused.stdout
    for command in (("api", "--port", "9"), ("model", "rekey"), ("mcp", "rekey")):
        also = await asyncio.to_thread(_yuxi, *command, env=second)
        assert also.returncode == 1 and MISMATCH in " ".join(also.stderr.split()), command

    # the first host's key copied to the second: it starts
    same = await _worker_starts({**second, "YUXI_SECRET_KEY": key})
    assert "recorded this server key" not in same and "Traceback" not in same
    assert await _recorded(world) == server_key_id(decode_key(key, "key"))


async def test_racing_first_processes_agree(world: World, db_url: str) -> None:
    key = SecretBox(os.urandom(32))

    async def same(conn: AsyncConnection[Any], _: int) -> str:
        return await server_key_verify(conn, key)

    verdicts = await race(db_url, 20, same)
    assert sorted(successes(verdicts)) == ["current"] * 19 + ["recorded"]
    await world.execute("DELETE FROM yuxi.server_key")

    boxes = [SecretBox(os.urandom(32)) for _ in range(20)]

    async def different(conn: AsyncConnection[Any], i: int) -> str:
        return await server_key_verify(conn, boxes[i])

    results = await race(db_url, 20, different)
    [winner] = [i for i, result in enumerate(results) if result == "recorded"]
    assert all(isinstance(error, ServerKeyMismatch) for error in failures(results))
    assert len(failures(results)) == 19
    assert await _recorded(world) == boxes[winner].key_id


async def test_racing_first_processes_agree_as_processes(
    world: World, db_url: str, tmp_path: Path
) -> None:
    env = _env(db_url, tmp_path, YUXI_SECRET_KEY=new_key())
    first, second = await asyncio.gather(
        asyncio.to_thread(_yuxi, "mcp", "rekey", env=env),
        asyncio.to_thread(_yuxi, "mcp", "rekey", env=env),
    )
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    recorded = [p for p in (first, second) if "recorded this server key's" in p.stderr]
    assert len(recorded) == 1, first.stderr + second.stderr
    assert await _recorded(world) == server_key_id(decode_key(env["YUXI_SECRET_KEY"], "key"))


async def test_a_rotation_starts_with_the_previous_key_and_rekey_records_the_new_one(
    world: World, db_url: str, tmp_path: Path
) -> None:
    old, new = new_key(), new_key()
    before = _env(db_url, tmp_path, YUXI_SECRET_KEY=old, MODEL_KEY=MODEL_KEY)
    added = await asyncio.to_thread(
        _yuxi, "model", "add", "openai:rotated", "--api-key-env", "MODEL_KEY", env=before
    )
    assert added.returncode == 0, added.stderr
    assert await _recorded(world) == server_key_id(decode_key(old, "old"))

    rotating = _env(db_url, tmp_path, YUXI_SECRET_KEY=new, YUXI_SECRET_KEY_PREVIOUS=old)
    assert "rotation is under way" in await _worker_starts(rotating)
    assert await _recorded(world) == server_key_id(decode_key(old, "old"))

    rekeyed = await asyncio.to_thread(_yuxi, "model", "rekey", env=rotating)
    assert rekeyed.returncode == 0, rekeyed.stderr
    assert "re-sealed 1 keys" in rekeyed.stderr
    assert "the database records the current server key" in rekeyed.stderr
    assert await _recorded(world) == server_key_id(decode_key(new, "new"))

    # the new key alone starts; the old one alone is refused
    started = await _worker_starts(_env(db_url, tmp_path, YUXI_SECRET_KEY=new))
    assert "rotation" not in started and "recorded this" not in started
    refused = await asyncio.to_thread(
        _yuxi, "worker", env=_env(db_url, tmp_path, YUXI_SECRET_KEY=old)
    )
    assert refused.returncode == 1 and MISMATCH in " ".join(refused.stderr.split())
    for key in (old, new, MODEL_KEY):
        assert key not in rekeyed.stderr + refused.stderr + added.stderr
