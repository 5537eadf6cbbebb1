"""Hostile skill uploads over real HTTP: any user may upload a personal skill, so every
archive and every SKILL.md here is built to hurt (YAML nested thousands deep or
expanding without bound, zip bombs, tens of thousands of members, paths out of the
skill, links, corrupted archives). Each is a clear 4xx with the error body, as a
personal and as a shared upload, as the body and as a multipart part: never a 500, no
traceback in the server's log, nothing stored, no file written anywhere."""

from __future__ import annotations

import io
import random
import stat
import struct
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.api.conftest import Api, client_error, error_of
from tests.api.log_capture import Capture
from tests.fixtures.skills import skill_md, zip_of
from yuxi.skills.format import MAX_BYTES, MAX_ENTRIES, MAX_FILES
from yuxi.skills.front_matter import MAX_DEPTH, MAX_FRONT_MATTER_BYTES, MAX_NODES

pytestmark = pytest.mark.asyncio(loop_scope="module")

ZIP = {"content-type": "application/zip"}
# outside every root: a path an archive names must never appear here
ELSEWHERE = Path("/tmp") / f"yuxi-escaped-{uuid.uuid4().hex}"


def archive(
    files: dict[str, bytes | str], method: int = zipfile.ZIP_DEFLATED, *, top: str = ""
) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as out:
        for name, data in files.items():
            out.writestr(top + name, data)
    return buffer.getvalue()


def with_front(front: str, *, name: str = "hostile") -> bytes:
    """A skill whose SKILL.md has ``front`` after its name in the front matter."""
    return archive({"SKILL.md": f"---\nname: {name}\n{front}\n---\n\nDo it.\n"})


def laughs(levels: int) -> str:
    lines = ["description: x", "l0: &l0 [a, a, a, a, a, a, a, a, a, a]"]
    for level in range(1, levels):
        aliases = ", ".join([f"*l{level - 1}"] * 10)
        lines.append(f"l{level}: &l{level} [{aliases}]")
    return "\n".join(lines)


def block_nesting(depth: int) -> str:
    return "description: x\nm:\n" + "".join(" " * level + "k:\n" for level in range(1, depth))


# (what it is, the archive, a word the message must have)
FRONT_MATTER: list[tuple[str, bytes, str]] = [
    ("flow sequences 5,000 deep", with_front("description: " + "[" * 5000 + "]" * 5000), "deeper"),
    (
        "flow mappings 5,000 deep",
        with_front("description: " + "{a: " * 5000 + "}" * 5000),
        "deeper",
    ),
    ("block mappings 300 deep", with_front(block_nesting(300)), "deeper"),
    (
        f"one level past {MAX_DEPTH}",
        with_front("m: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH),
        "deeper",
    ),
    ("a billion laughs", with_front(laughs(9)), str(MAX_NODES)),
    ("an alias inside its own anchor", with_front("description: x\nm: &a {x: *a}"), "own anchor"),
    ("an undefined alias", with_front("description: *nowhere"), "undefined alias"),
    (
        "front matter past its size",
        with_front("description: x\nm: '" + "x" * MAX_FRONT_MATTER_BYTES + "'"),
        str(MAX_FRONT_MATTER_BYTES),
    ),
    ("a 13th month", with_front("description: x\nwhen: 2024-13-45"), "month"),
    ("an integer of 5,000 digits", with_front("description: x\nn: " + "7" * 5000), "digits"),
    (
        "an offset of 99 hours",
        with_front("description: x\nat: 2024-01-01 10:00:00 +99:00"),
        "offset",
    ),
    ("a timestamp tag on text", with_front("description: x\nat: !!timestamp soon"), "bad value"),
    ("an int tag on nothing", with_front("description: x\nn: !!int \x85"), "bad value"),
    ("a NUL character", with_front("description: x\x00"), "not valid YAML"),
    ("an unhashable key", with_front("description: x\n? [a]\n: b"), "not valid YAML"),
]


def _entries(count: int, directories: bool = False) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as out:
        out.writestr("SKILL.md", skill_md("many", "many files"))
        for index in range(count):
            if directories:
                out.writestr(zipfile.ZipInfo(f"{index}/"), b"")
            else:
                out.writestr(f"f/{index}", b"")
    return buffer.getvalue()


def _link(target: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as out:
        out.writestr("SKILL.md", skill_md("linked", "a link"))
        link = zipfile.ZipInfo("notes.md")
        link.create_system = 3
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        out.writestr(link, target)
    return buffer.getvalue()


def _patched(data: bytes, change: Callable[[bytearray, int, int], None]) -> bytes:
    """``data`` with ``change(data, local header offset, central entry offset)`` applied
    to its last member's headers."""
    patched = bytearray(data)
    central = patched.rfind(b"PK\x01\x02")
    (local,) = struct.unpack_from("<L", patched, central + 42)
    change(patched, local, central)
    return bytes(patched)


def _flags(bits: int) -> Callable[[bytearray, int, int], None]:
    def change(data: bytearray, local: int, central: int) -> None:
        for at in (local + 6, central + 8):
            (flags,) = struct.unpack_from("<H", data, at)
            struct.pack_into("<H", data, at, flags | bits)

    return change


def _method(method: int) -> Callable[[bytearray, int, int], None]:
    def change(data: bytearray, local: int, central: int) -> None:
        struct.pack_into("<H", data, local + 8, method)
        struct.pack_into("<H", data, central + 10, method)

    return change


def _utf8_name(raw: bytes) -> Callable[[bytearray, int, int], None]:
    """The name ``raw`` (as long as the one it replaces: no offset moves), flagged UTF-8."""

    def change(data: bytearray, local: int, central: int) -> None:
        _flags(0x800)(data, local, central)
        (length,) = struct.unpack_from("<H", data, central + 28)
        assert len(raw) == length
        data[central + 46 : central + 46 + length] = raw
        data[local + 30 : local + 30 + length] = raw

    return change


def _escape(name: str) -> bytes:
    return archive({"SKILL.md": skill_md("escape", "escapes"), name: b"escaped"})


PLAIN = archive({"SKILL.md": skill_md("plain", "plain"), "notes.md": b"n" * 4000})
ARCHIVES: list[tuple[str, bytes, str]] = [
    (
        "one member inflating past the limit",
        archive({"SKILL.md": skill_md("bomb", "x"), "zeros": b"\0" * (MAX_BYTES + 1)}),
        "inflates past",
    ),
    (
        "many members inflating past it together",
        archive({"SKILL.md": skill_md("bomb", "x")} | {f"z{i}": b"\0" * 2**20 for i in range(20)}),
        "inflates past",
    ),
    (
        "a SKILL.md inflating past it",
        archive({"SKILL.md": skill_md("bomb", "x") + " " * (MAX_BYTES + 1)}),
        "inflates past",
    ),
    (f"{MAX_FILES + 1} files", _entries(MAX_FILES + 1), f"at most {MAX_FILES} files"),
    ("10,000 files", _entries(10_000), f"at most {MAX_ENTRIES} entries"),
    (f"{MAX_ENTRIES + 1} directories", _entries(MAX_ENTRIES + 1, True), f"{MAX_ENTRIES} entries"),
    ("150,000 directories", _entries(150_000, True), f"{MAX_ENTRIES} entries"),
    ("an absolute path", _escape(f"{ELSEWHERE}/abs"), "relative"),
    ("a path up and out", _escape(f"../../../../../../..{ELSEWHERE}/up"), ".."),
    ("a path up and out from inside", _escape("a/../../escaped.md"), ".."),
    ("just ..", _escape(".."), ".."),
    ("a drive letter", _escape("C:/escaped.md"), "relative"),
    ("a backslash", _escape("..\\escaped.md"), "relative"),
    ("a symbolic link out", _link(str(ELSEWHERE)), "links"),
    ("a symbolic link up", _link("../../../etc/passwd"), "links"),
    (
        "a file that is also a directory",
        archive({"SKILL.md": skill_md("tree", "x"), "a": b"1", "a/b": b"2"}),
        "both a file and a directory",
    ),
    (
        "a SKILL.md that is also a directory",
        archive({"SKILL.md": skill_md("tree", "x"), "SKILL.md/b": b"2"}),
        "both a file and a directory",
    ),
    (
        "one path twice",
        archive({"SKILL.md": skill_md("twice", "x"), "a//b": b"1", "a/b": b"2"}),
        "twice",
    ),
    ("an encrypted member", _patched(PLAIN, _flags(0x1)), "encrypted"),
    ("an unknown compression", _patched(PLAIN, _method(99)), "compression"),
    ("a name that is not UTF-8", _patched(PLAIN, _utf8_name(b"notes\xff\xfe\xfd")), "not a ZIP"),
    ("a truncated archive", PLAIN[: len(PLAIN) // 2], "not a ZIP"),
    ("no archive at all", b"[" * 100_000, "not a ZIP"),
    ("an empty body", b"", "not a ZIP"),
    ("no SKILL.md", archive({"README.md": b"x"}), "SKILL.md"),
]


async def upload(api: Api, who: str, data: bytes, *, multipart: bool = False) -> dict[str, str]:
    """The error of uploading ``data`` as ``who`` (alice: a personal skill; admin: a
    shared one); asserts it is a 4xx with the error body."""
    path = "/api/skills?personal=true" if who == "alice" else "/api/skills"
    client = api.clients[who]
    if multipart:
        response = await client.post(path, files={"file": ("skill.zip", data, "application/zip")})
    else:
        response = await client.post(path, content=data, headers=ZIP)
    return client_error(response)


async def nothing_stored(api: Api) -> None:
    assert await api.value("SELECT count(*) FROM yuxi.skill_versions") == 0
    assert await api.value("SELECT count(*) FROM yuxi.skills") == 0
    files = await api.sql(
        "SELECT f.path FROM yuxi.file_list(yuxi.workspace_file_tree(%s), 'skills') f",
        api.uids["alice"],
    )
    assert files == []
    assert not ELSEWHERE.exists()
    assert not [p for p in api.home.rglob("*") if "skill" in p.name.lower()]


@pytest.mark.parametrize(("what", "data", "words"), FRONT_MATTER, ids=[c[0] for c in FRONT_MATTER])
async def test_hostile_front_matter_is_400(
    api: Api, logs: Capture, what: str, data: bytes, words: str
) -> None:
    for who in ("alice", "admin"):
        for multipart in (False, True):
            error = await upload(api, who, data, multipart=multipart)
            assert error["code"] == "invalid_input", (what, error)
            assert words in error["message"], (what, error)
    await nothing_stored(api)
    assert logs.tracebacks() == []


@pytest.mark.parametrize(("what", "data", "words"), ARCHIVES, ids=[c[0] for c in ARCHIVES])
async def test_hostile_archives_are_400(
    api: Api, logs: Capture, what: str, data: bytes, words: str
) -> None:
    for who in ("alice", "admin"):
        error = await upload(api, who, data)
        assert error["code"] == "invalid_input", (what, error)
        assert words in error["message"], (what, error)
    await nothing_stored(api)
    assert logs.tracebacks() == []


async def test_corrupted_archives_are_never_a_server_error(api: Api, logs: Capture) -> None:
    """Bytes of real archives (deflated, bzip2, lzma, stored; with a top directory)
    changed at random: each is refused with a 4xx, or, where the change did not matter,
    accepted; never a 500."""
    rng = random.Random(27)
    valid = [zip_of("writing-style"), zip_of("writing-style", top=False)] + [
        archive(
            {"SKILL.md": skill_md("mangled", "x") * 3, "notes.md": b"notes " * 500},
            method,
            top=top,
        )
        for method in (
            zipfile.ZIP_DEFLATED,
            zipfile.ZIP_BZIP2,
            zipfile.ZIP_LZMA,
            zipfile.ZIP_STORED,
        )
        for top in ("", "mangled/")
    ]
    statuses: set[int] = set()
    for _ in range(300):
        data = bytearray(rng.choice(valid))
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        response = await api.alice.post(
            "/api/skills?personal=true", content=bytes(data), headers=ZIP
        )
        statuses.add(response.status_code)
        if response.status_code == 201:  # the change hit nothing that matters
            slug = response.json()["slug"]
            assert (await api.alice.delete(f"/api/skills/{slug}?personal=true")).status_code == 204
        else:
            client_error(response)
    assert 400 in statuses, statuses
    await nothing_stored(api)
    assert logs.tracebacks() == []


async def test_a_plain_skill_still_uploads(api: Api) -> None:
    """The limits leave a real skill alone: YAML with anchors, merge keys, dates, a
    nesting at the limit; a top directory; directories in the archive."""
    nesting = "[" * (MAX_DEPTH - 2) + "x" + "]" * (MAX_DEPTH - 2)
    front = (
        "description: &d a skill\nsummary: *d\nbase: &b {x: 1}\nmerged: {<<: *b, y: 2}\n"
        f"released: 2024-02-29\nm: {nesting}"
    )
    data = archive(
        {"SKILL.md": f"---\nname: plain-ok\n{front}\n---\n\nDo it.\n", "docs/a.md": b"a"},
        top="plain-ok/",
    )
    response = await api.alice.post("/api/skills?personal=true", content=data, headers=ZIP)
    assert response.status_code == 201, response.text
    assert (await api.alice.delete("/api/skills/plain-ok?personal=true")).status_code == 204
    error_of(await api.alice.delete("/api/skills/plain-ok?personal=true"), 404)
