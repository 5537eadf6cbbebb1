"""``yuxi mcp …`` as a real process: servers added with headers read from the
environment, never printed, sealed at rest, re-sealed on a key rotation; the admin-only
rules hold for the CLI too."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.integration.conftest import World
from tests.mcp_servers import EXPECTED_TOKEN, stdio_command
from yuxi.mcp.secrets import open_map
from yuxi.models.secret_box import SecretBox, new_key
from yuxi.models.secret_box import _decode_key as decode_key


def _yuxi(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "yuxi.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_add_list_rekey_remove(world: World, db_url: str, tmp_path: Path) -> None:
    old = new_key()
    env = {"YUXI_DATABASE_URL": db_url, "YUXI_HOME": str(tmp_path), "YUXI_SECRET_KEY": old}
    added = await asyncio.to_thread(
        _yuxi,
        "mcp", "add", "search", "--url", "http://127.0.0.1:9/mcp",
        "--header", "Authorization=SEARCH_TOKEN", "--call-timeout", "5",
        env={**env, "SEARCH_TOKEN": EXPECTED_TOKEN},
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "added MCP server search (streamable_http, all)" in added.stderr
    command, args = stdio_command()
    refused = await asyncio.to_thread(
        _yuxi, "mcp", "add", "local", "--command", command, "--share", "owner", "--as", "alice",
        *[f"--arg={a}" for a in args], env=env,
    )  # fmt: skip
    assert refused.returncode == 1 and "only admins may register stdio" in refused.stderr
    listed = await asyncio.to_thread(_yuxi, "mcp", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    [server] = json.loads(listed.stdout)
    assert server["slug"] == "search" and server["header_names"] == ["Authorization"]
    assert EXPECTED_TOKEN not in listed.stdout + added.stdout + added.stderr
    [(server_id, sealed)] = await world.fetch("SELECT id, headers_sealed FROM yuxi.mcp_servers")
    assert EXPECTED_TOKEN.encode() not in bytes(sealed)
    box = SecretBox(decode_key(old, "old"))
    assert open_map(box, server_id, "headers", bytes(sealed)) == {"Authorization": EXPECTED_TOKEN}

    new = new_key()
    rotated = {**env, "YUXI_SECRET_KEY": new, "YUXI_SECRET_KEY_PREVIOUS": old}
    rekeyed = await asyncio.to_thread(_yuxi, "mcp", "rekey", env=rotated)
    assert rekeyed.returncode == 0 and "re-sealed 1 MCP secrets" in rekeyed.stderr
    [(resealed,)] = await world.fetch("SELECT headers_sealed FROM yuxi.mcp_servers")
    new_box = SecretBox(decode_key(new, "new"))
    assert (
        open_map(new_box, server_id, "headers", bytes(resealed))["Authorization"] == EXPECTED_TOKEN
    )

    removed = await asyncio.to_thread(_yuxi, "mcp", "remove", "search", env=env)
    assert removed.returncode == 0, removed.stderr
    assert await world.fetch("SELECT 1 FROM yuxi.mcp_servers") == []
