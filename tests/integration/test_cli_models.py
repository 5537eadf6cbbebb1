"""``yuxi model …`` as a real process: keys in through the environment or stdin, never
printed, sealed at rest, and re-sealed on a key rotation."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from tests.integration.conftest import World
from yuxi.models.registry import model_context
from yuxi.models.secret_box import SecretBox, new_key

KEY = "sk-cli-0123456789abcdef-LAST"


def _yuxi(*args: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "yuxi.cli", *args],
        env={**os.environ, **env},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_add_list_rekey_remove(world: World, db_url: str, tmp_path: Path) -> None:
    old = new_key()
    env = {"YUXI_DATABASE_URL": db_url, "YUXI_HOME": str(tmp_path), "YUXI_SECRET_KEY": old}
    added = await asyncio.to_thread(
        _yuxi,
        "model", "add", "openai:cli-model", "--name", "CLI", "--base-url", "http://127.0.0.1:9/v1",
        "--api-key-env", "CLI_KEY", "--no-streaming", "--price-in", "0.5",
        env={**env, "CLI_KEY": KEY},
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert KEY not in added.stdout + added.stderr
    again = await asyncio.to_thread(
        _yuxi, "model", "add", "openai:cli-model", "--api-key-stdin", env=env, stdin=KEY + "\n"
    )
    assert again.returncode == 1 and "already registered" in again.stderr
    listed = await asyncio.to_thread(_yuxi, "model", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "openai:cli-model" in listed.stdout and "…LAST" in listed.stdout
    assert KEY not in listed.stdout
    [(model_id, sealed)] = await world.fetch("SELECT id, api_key_sealed FROM yuxi.models")
    assert KEY.encode() not in bytes(sealed)
    assert SecretBox(_raw(old)).open(bytes(sealed), model_context(model_id)) == KEY

    new = new_key()
    rotated = {**env, "YUXI_SECRET_KEY": new, "YUXI_SECRET_KEY_PREVIOUS": old}
    rekeyed = await asyncio.to_thread(_yuxi, "model", "rekey", env=rotated)
    assert rekeyed.returncode == 0, rekeyed.stderr
    assert "re-sealed 1 keys" in rekeyed.stderr
    [(resealed,)] = await world.fetch("SELECT api_key_sealed FROM yuxi.models")
    assert SecretBox(_raw(new)).open(bytes(resealed), model_context(model_id)) == KEY
    twice = await asyncio.to_thread(_yuxi, "model", "rekey", env=rotated)
    assert "re-sealed 0 keys; 1 already" in twice.stderr

    removed = await asyncio.to_thread(_yuxi, "model", "remove", "openai:cli-model", env=env)
    assert removed.returncode == 0, removed.stderr
    assert await world.fetch("SELECT count(*) FROM yuxi.models") == [(0,)]
    missing = await asyncio.to_thread(_yuxi, "model", "remove", "openai:cli-model", env=env)
    assert missing.returncode == 1 and "no platform model" in missing.stderr


def _raw(key: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(key + "=" * (-len(key) % 4))
