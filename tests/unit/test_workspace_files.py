"""The user's workspace files: comments dropped from prompts, the AGENTS.md template,
and atomic writes and edits that never follow a symlink."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from yuxi.files.workspace import (
    AGENTS_TEMPLATE,
    MEMORY_FILE,
    PROMPT_LIMIT,
    WorkspaceFileRefused,
    edit_workspace_file,
    ensure_agents_template,
    read_prompt_files,
    read_workspace_file,
    without_comments,
    write_workspace_file,
)


def test_comments_are_notes_for_the_user_and_never_reach_a_prompt(tmp_path: Path) -> None:
    assert without_comments("a<!-- hidden -->b<!--\nmore\n-->c") == "abc"
    assert without_comments("unclosed <!-- stays") == "unclosed <!-- stays"
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "AGENTS.md").write_text("<!-- note -->\nBe brief.\n<!-- another -->\n")
    (agents / "USER.md").write_text("<!-- only a note -->\n")
    [found] = read_prompt_files(tmp_path)
    assert (found.name, found.text) == ("agents/AGENTS.md", "Be brief.")


def test_the_template_is_made_once_and_adds_nothing_to_the_prompt(tmp_path: Path) -> None:
    assert ensure_agents_template(tmp_path / "ws")
    assert (tmp_path / "ws/agents/AGENTS.md").read_text() == AGENTS_TEMPLATE
    assert read_prompt_files(tmp_path / "ws") == []
    (tmp_path / "ws/agents/AGENTS.md").unlink()
    assert not ensure_agents_template(tmp_path / "ws")  # agents/ exists: left alone
    assert not (tmp_path / "ws/agents/AGENTS.md").exists()
    # an agents symlink (even a dangling one) is never followed
    os.makedirs(tmp_path / "other")
    (tmp_path / "other/agents").symlink_to(tmp_path / "elsewhere")
    assert not ensure_agents_template(tmp_path / "other")
    assert not (tmp_path / "elsewhere").exists()


def test_an_edit_over_the_limit_changes_nothing(tmp_path: Path) -> None:
    write_workspace_file(tmp_path, MEMORY_FILE, b"x" * (PROMPT_LIMIT - 2))
    saved = edit_workspace_file(tmp_path, MEMORY_FILE, lambda text: text + "y")
    assert saved.bytes == PROMPT_LIMIT - 1
    with pytest.raises(WorkspaceFileRefused, match="would be 65537 bytes; the limit is 65536"):
        edit_workspace_file(tmp_path, MEMORY_FILE, lambda text: text + "zz")
    assert (tmp_path / MEMORY_FILE).read_bytes() == b"x" * (PROMPT_LIMIT - 2) + b"y"
    assert os.listdir(tmp_path / "agents") == ["MEMORY.md"]  # no temporary file left


def test_an_edit_needs_an_existing_regular_file(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceFileRefused, match="does not exist"):
        edit_workspace_file(tmp_path, MEMORY_FILE, lambda text: text)
    (tmp_path / "agents").mkdir()
    outside = tmp_path / "outside.md"
    outside.write_text("outside")
    (tmp_path / MEMORY_FILE).symlink_to(outside)
    with pytest.raises(WorkspaceFileRefused, match="symbolic link"):
        edit_workspace_file(tmp_path, MEMORY_FILE, lambda text: text + "!")
    with pytest.raises(WorkspaceFileRefused, match="symbolic link"):
        write_workspace_file(tmp_path, MEMORY_FILE, b"!")
    assert outside.read_text() == "outside"
    assert read_workspace_file(tmp_path, MEMORY_FILE) is None
