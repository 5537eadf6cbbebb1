"""The Agent Skills reader: front matter, canonical digest, directories and ZIPs with
their paths confined; dependency closure, cycles and personal shadowing."""

from __future__ import annotations

import io
import os
import random
import stat
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures.skills import SKILLS, skill_md, zip_of
from yuxi.skills.format import (
    MAX_BYTES,
    MAX_ENTRIES,
    SkillFormatError,
    bundle,
    canonical_digest,
    parse_skill_md,
    read_directory,
    read_source,
    read_zip,
)
from yuxi.skills.front_matter import MAX_DEPTH, MAX_FRONT_MATTER_BYTES, MAX_NODES
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


def _peak_bytes(call: Callable[[], object]) -> int:
    """The most memory ``call`` held at once (it must raise SkillFormatError)."""
    tracemalloc.start()
    try:
        with pytest.raises(SkillFormatError):
            call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_bomb_is_read_no_further_than_the_limit() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("SKILL.md", skill_md("ok", "x"))
        with archive.open("zeros", "w") as member:
            chunk = b"\0" * 2**20
            for _ in range(256):  # 256 MiB, a quarter MiB on the wire
                member.write(chunk)
    data = buffer.getvalue()
    assert len(data) < 2**20
    assert _peak_bytes(lambda: read_zip(data)) < 3 * MAX_BYTES


def test_a_huge_directory_is_refused_before_it_is_read() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("SKILL.md", skill_md("ok", "x"))
        for index in range(150_000):
            archive.writestr(zipfile.ZipInfo(f"{index}/"), b"")
    data = buffer.getvalue()
    # zipfile would build 150,000 entries first: about 70 MB
    assert _peak_bytes(lambda: read_zip(data)) < 2**20
    # a directory under the byte limit with too many entries is counted after it is read
    few = zipfile.ZipFile(io.BytesIO(data))
    small = io.BytesIO()
    with zipfile.ZipFile(small, "w") as archive:
        for info in few.infolist()[: MAX_ENTRIES + 1]:
            archive.writestr(info, b"")
    with pytest.raises(SkillFormatError, match=f"at most {MAX_ENTRIES} entries"):
        read_zip(small.getvalue())


def test_corrupted_archives_are_refused_as_such() -> None:
    """Bytes of real archives changed at random: each reads, or is a SkillFormatError;
    zipfile's own errors (a negative seek, an unknown version, zlib's, lzma's, a
    truncated stream) never come through."""
    rng = random.Random(27)
    valid = []
    for method in (zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA, zipfile.ZIP_STORED):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", method) as archive:
            archive.writestr("SKILL.md", skill_md("ok", "x") * 20)
            archive.writestr("a.txt", b"hello " * 1000)
        valid.append(buffer.getvalue())
    refused = 0
    for _ in range(3000):
        data = bytearray(rng.choice(valid))
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            bundle(read_zip(bytes(data)))
        except SkillFormatError:
            refused += 1
    assert refused > 1000


@pytest.mark.parametrize(
    ("front", "message"),
    [
        ("description: " + "[" * 5000 + "]" * 5000, f"deeper than {MAX_DEPTH}"),
        ("description: x\nm: &a [*a]", "own anchor"),
        ("description: x\nwhen: 2024-02-30", "bad value"),
        ("description: x\nm: " + "x" * MAX_FRONT_MATTER_BYTES, f"{MAX_FRONT_MATTER_BYTES} bytes"),
    ],
    ids=["5,000 deep", "an alias in its anchor", "February 30", "too long"],
)
def test_front_matter_past_its_limits_is_refused(front: str, message: str) -> None:
    with pytest.raises(SkillFormatError, match=message):
        parse_skill_md(f"---\nname: ok\n{front}\n---\n")


def test_aliases_count_as_what_they_repeat() -> None:
    anchors = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 3):
        anchors.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 10) + "]")
    text = "---\nname: ok\ndescription: x\n" + "\n".join(anchors) + "\n---\n"
    assert len(parse_skill_md(text).front_matter["a2"]) == 10  # a2 is 1,111 values: read
    anchors.append("a3: &a3 [" + ", ".join(["*a2"] * 10) + "]")  # 11,111: refused
    text = "---\nname: ok\ndescription: x\n" + "\n".join(anchors) + "\n---\n"
    with pytest.raises(SkillFormatError, match=f"more than {MAX_NODES} values"):
        parse_skill_md(text)
