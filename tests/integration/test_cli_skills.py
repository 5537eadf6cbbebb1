"""``yuxi skill``: add a shared skill from a directory and from a ZIP (new versions only
for new bytes), refuse a ZIP escaping its root, put a personal skill in a workspace (in
the file store, replacing the skill's files as a whole), list, show versions, delete,
as an operator would from a shell."""

from __future__ import annotations

import io
import os
import shutil
import zipfile
from pathlib import Path

from tests.fixtures.skills import SKILLS, skill_md, zip_of
from tests.integration.conftest import World
from tests.integration.test_cli_knowledge import _yuxi
from yuxi.skills.format import read_source


async def test_skill_add_list_versions_delete(world: World, db_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "YUXI_DATABASE_URL": db_url, "YUXI_HOME": str(tmp_path / "home")}
    code, out, err = await _yuxi(env, "skill", "add", str(SKILLS / "report-writer"))
    assert code == 1 and "do not exist: writing-style" in err, (out, err)

    code, out, err = await _yuxi(env, "skill", "add", str(SKILLS / "writing-style"))
    assert code == 0, err
    sha = read_source(SKILLS / "writing-style").sha256
    assert out.split() == ["writing-style", "1", sha]
    archive = tmp_path / "report-writer.zip"
    archive.write_bytes(zip_of("report-writer"))
    code, out, err = await _yuxi(env, "skill", "add", str(archive), "--share-with", "bob")
    assert code == 0, err
    assert out.split()[:2] == ["report-writer", "1"]
    code, out, err = await _yuxi(env, "skill", "add", str(archive))
    assert code == 0 and "unchanged" in err

    code, out, err = await _yuxi(env, "skill", "list", "--user", "alice")
    assert code == 0, err
    assert "writing-style" in out and "report-writer" not in out  # shared with bob only
    code, out, err = await _yuxi(env, "skill", "versions", "writing-style")
    assert code == 0 and sha in out

    code, out, err = await _yuxi(env, "skill", "delete", "report-writer")
    assert code == 0, err
    assert await world.value("SELECT count(*) FROM yuxi.skills") == 1


async def test_a_zip_escaping_its_root_is_refused(
    world: World, db_url: str, tmp_path: Path
) -> None:
    env = {**os.environ, "YUXI_DATABASE_URL": db_url, "YUXI_HOME": str(tmp_path / "home")}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("SKILL.md", skill_md("evil", "x"))
        archive.writestr("../../outside.txt", "x")
    evil = tmp_path / "evil.zip"
    evil.write_bytes(buffer.getvalue())
    code, out, err = await _yuxi(env, "skill", "add", str(evil))
    assert code == 1 and "cannot name '..'" in err, (out, err)
    assert await world.value("SELECT count(*) FROM yuxi.skills") == 0
    assert not (tmp_path / "outside.txt").exists()


async def test_a_personal_skill_goes_into_the_workspace(
    world: World, db_url: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "YUXI_DATABASE_URL": db_url, "YUXI_HOME": str(home)}
    code, _out, err = await _yuxi(
        env, "skill", "add", str(SKILLS / "report-writer"), "--personal", "alice"
    )
    assert code == 1 and "writing-style" in err  # its dependency is nowhere
    assert await personal_files(world) == {}

    # a first copy with one more file: the next add replaces the skill's files as a whole
    first = tmp_path / "writing-style"
    shutil.copytree(SKILLS / "writing-style", first)
    (first / "extra.md").write_text("dropped by the next add")
    code, _out, err = await _yuxi(env, "skill", "add", str(first), "--personal", "alice")
    assert code == 0, err
    assert "skills/writing-style/extra.md" in await personal_files(world)

    code, out, err = await _yuxi(
        env, "skill", "add", str(SKILLS / "writing-style"), "--personal", "alice"
    )
    assert code == 0, err
    found = read_source(SKILLS / "writing-style")
    assert out.split() == ["writing-style", "personal", found.sha256]
    assert await personal_files(world) == {
        f"skills/writing-style/{name}": data for name, data in found.files.items()
    }
    assert not (home / "workspaces").exists()  # the store holds it, not this host's disk
    assert await world.value("SELECT count(*) FROM yuxi.skills") == 0


async def personal_files(world: World) -> dict[str, bytes]:
    """alice's files under skills/ of her workspace tree in the store."""
    rows = await world.fetch(
        "SELECT f.path, f.content_id FROM yuxi.file_list(yuxi.workspace_file_tree(%s), 'skills') f",
        world.alice,
    )
    files = {}
    for path, content in rows:
        chunks = await world.fetch(
            "SELECT data FROM yuxi.file_chunks_read(%s, 0, 1000) ORDER BY n", content
        )
        files[path] = b"".join(bytes(chunk) for (chunk,) in chunks)
    return files
