"""The Agent Skills reader: front matter, canonical digest, directories and ZIPs with
their paths confined; dependency closure, cycles and personal shadowing."""

from __future__ import annotations

import io
import os
import stat
import zipfile
from pathlib import Path

import pytest

from tests.fixtures.skills import SKILLS, skill_md, zip_of
from yuxi.skills.format import (
    MAX_BYTES,
    SkillFormatError,
    canonical_digest,
    parse_skill_md,
    read_directory,
    read_source,
    read_zip,
)
from yuxi.skills.resolve import (
    SkillError,
    SkillRecord,
    closure,
    merge,
    personal_skills,
    resolve_selection,
)


def test_front_matter_is_read_with_its_dependencies() -> None:
    found = read_source(SKILLS / "report-writer")
    meta = found.meta
    assert meta.name == "report-writer"
    assert meta.skills == ("writing-style",)
    # allowed-tools may name another product's tools; they are kept, used only if built-in
    assert meta.tools == ("calculator", "Bash(git:*)")
    assert meta.front_matter["metadata"] == {"author": "platform-team", "version": "1.0"}
    assert meta.body.startswith("# Report writer")
    assert set(found.files) == {"SKILL.md", "templates/outline.md"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# no front matter", "must start with YAML front matter"),
        ("---\nname: [\n---\n", "not valid YAML"),
        ("---\nname: Bad_Name\ndescription: x\n---\n", "lowercase letters"),
        ("---\nname: a--b\ndescription: x\n---\n", "lowercase letters"),
        ("---\nname: ok\n---\n", "needs a description"),
        ("---\nname: ok\ndescription: x\ndependencies: {skills: [ok]}\n---\n", "itself"),
        ("---\nname: ok\ndescription: x\ndependencies: {plugins: [a]}\n---\n", "unknown"),
        ("---\nname: ok\ndescription: x\ndependencies: {mcps: [a__b]}\n---\n", "invalid"),
    ],
)
def test_malformed_front_matter_is_refused_clearly(text: str, message: str) -> None:
    with pytest.raises(SkillFormatError, match=message):
        parse_skill_md(text)


def test_the_digest_is_over_sorted_paths_and_contents() -> None:
    one = canonical_digest({"b.md": b"2", "SKILL.md": b"1"})
    assert one == canonical_digest({"SKILL.md": b"1", "b.md": b"2"})  # order-free
    assert one != canonical_digest({"SKILL.md": b"1", "b.md": b"3"})  # content
    assert one != canonical_digest({"SKILL.md": b"1", "c.md": b"2"})  # path
    # path and content boundaries cannot be shifted
    assert canonical_digest({"ab": b"c"}) != canonical_digest({"a": b"bc"})


def test_a_zip_with_a_top_directory_equals_the_directory() -> None:
    directory = read_source(SKILLS / "report-writer")
    for top in (True, False):
        zipped = read_zip(zip_of("report-writer", top=top))
        assert canonical_digest(zipped) == directory.sha256


def _zip(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize("name", ["/etc/passwd", "../evil.md", "a/../../evil.md", "C:/x", "a\\b"])
def test_zip_paths_are_confined(name: str) -> None:
    data = _zip({"SKILL.md": skill_md("ok", "x").encode(), name: b"x"})
    with pytest.raises(SkillFormatError):
        read_zip(data)


def test_a_zip_bomb_is_refused_by_what_it_inflates_to() -> None:
    data = _zip({"SKILL.md": skill_md("ok", "x").encode(), "big.txt": b"\0" * (MAX_BYTES + 1)})
    assert len(data) < MAX_BYTES // 100  # small on the wire
    with pytest.raises(SkillFormatError, match="inflates past"):
        read_zip(data)


def test_a_symlink_in_a_zip_is_refused() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("SKILL.md", skill_md("ok", "x"))
        link = zipfile.ZipInfo("link")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
    with pytest.raises(SkillFormatError, match="links"):
        read_zip(buffer.getvalue())


def test_a_directory_with_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "SKILL.md").write_text(skill_md("ok", "x"))
    os.symlink("/etc/hostname", tmp_path / "host")
    with pytest.raises(SkillFormatError, match="symbolic links"):
        read_directory(tmp_path)


def _record(slug: str, *deps: str, source: str = "shared") -> SkillRecord:
    return SkillRecord(slug, source, f"{slug} skill", skills=deps)


def test_closure_follows_dependencies_and_names_cycles() -> None:
    available = {s.slug: s for s in (_record("a", "b"), _record("b", "c"), _record("c"))}
    assert closure(["a"], available) == ["a", "b", "c"]
    cyclic = {**available, "c": _record("c", "a")}
    with pytest.raises(SkillError, match="cycle: a -> b -> c -> a"):
        closure(["a"], cyclic)
    missing = {**available, "c": _record("c", "gone")}
    with pytest.raises(SkillError, match="skill gone \\(needed by c\\) is not available"):
        closure(["a"], missing)


def test_an_unset_selection_leaves_broken_skills_out_an_explicit_one_fails() -> None:
    available = {s.slug: s for s in (_record("ok"), _record("broken", "gone"))}
    assert resolve_selection(None, available) == ["ok"]
    assert resolve_selection(["ok", "unknown"], available) == ["ok"]  # ∩ what exists
    with pytest.raises(SkillError):
        resolve_selection(["broken"], available)


def test_a_personal_skill_shadows_the_shared_one(tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "writing-style"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(skill_md("writing-style", "my own style"))
    (tmp_path / "skills" / "Not_A_Slug").mkdir()  # skipped
    wrong = tmp_path / "skills" / "other"
    wrong.mkdir()
    (wrong / "SKILL.md").write_text(skill_md("different", "names another skill"))  # skipped
    personal = personal_skills(tmp_path)
    assert [p.slug for p in personal] == ["writing-style"]
    shared = [_record("writing-style"), _record("report-writer", "writing-style")]
    merged = merge(shared, personal)
    assert merged["writing-style"].source == "personal"
    assert merged["writing-style"].description == "my own style"
    assert merged["report-writer"].source == "shared"
