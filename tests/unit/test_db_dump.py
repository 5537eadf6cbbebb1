"""Choosing the pg_dump / pg_restore for a server (yuxi/db/dump.py): the first at least
as new as the server, or an error that says which version is needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from yuxi.db.dump import DumpError, choose_tool, human_size, tool_version


def _fake(directory: Path, name: str, version: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f'#!/bin/sh\necho "{name} (PostgreSQL) {version} (Debian {version}-1)"\n')
    path.chmod(0o755)
    return path


def test_the_first_tool_at_least_as_new_as_the_server_is_chosen(tmp_path: Path) -> None:
    old = _fake(tmp_path / "15", "pg_dump", "15.20")
    new = _fake(tmp_path / "18", "pg_dump", "18.6")
    found = tool_version(old)
    assert found is not None and found.major == 15
    assert choose_tool("pg_dump", 15, [old, new]).path == old
    chosen = choose_tool("pg_dump", 17, [old, new])
    assert chosen.path == new and chosen.version == "18.6"


def test_no_fitting_tool_says_which_version_is_needed(tmp_path: Path) -> None:
    old = _fake(tmp_path, "pg_dump", "15.20")
    with pytest.raises(DumpError) as refused:
        choose_tool("pg_dump", 18, [old, tmp_path / "missing"])
    message = str(refused.value)
    assert "pg_dump 18 or newer is needed for this PostgreSQL 18 server" in message
    assert f"{old} is 15.20" in message and "postgresql-client-18" in message
    with pytest.raises(DumpError, match="no pg_restore was found"):
        choose_tool("pg_restore", 16, [])


def test_sizes_read_as_people_read_them() -> None:
    assert human_size(512) == "512 bytes"
    assert human_size(1536) == "1.5 KiB"
    assert human_size(5 * 1024**3) == "5.0 GiB"
