"""Client paths and upload names (yuxi/files/workdir.py), without a database."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from yuxi.files.workdir import BadPath, client_relative, confined, media_type, safe_filename


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", "."),
        (".", "."),
        ("a/b.txt", "a/b.txt"),
        ("a//./b", "a/b"),
        ("uploads/", "uploads"),
        ("报告/总结.md", "报告/总结.md"),
    ],
)
def test_relative_paths_are_normalised(raw: str, expected: str) -> None:
    assert client_relative(raw).as_posix() == expected


@pytest.mark.parametrize(
    "raw", ["/abs", "~/x", "..", "a/../b", "a\\b", "a\x00b", "x" * 256, "a/" * 600]
)
def test_paths_that_could_leave_are_refused(raw: str) -> None:
    with pytest.raises(BadPath):
        client_relative(raw)


def test_confined_follows_links_and_refuses_those_leading_out(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "in").mkdir(parents=True)
    (root / "inside").symlink_to(root / "in")
    (root / "out").symlink_to(tmp_path)
    assert confined(root, "inside/x") == (root / "in" / "x").resolve()
    with pytest.raises(BadPath):
        confined(root, "out/elsewhere")
    (root / "loop").symlink_to(root / "loop")
    with contextlib.suppress(BadPath):  # a loop resolves to itself or is refused
        assert confined(root, "loop").is_relative_to(root.resolve())


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\me\\x.txt", "x.txt"),
        (".hidden", "hidden"),
        ("a\x00b\x1fc\u200b.txt", "abc.txt"),
        ("   ", "file"),
        (None, "file"),
        ("e\u0301.txt", "\u00e9.txt"),  # NFC
    ],
)
def test_upload_names_are_one_safe_component(raw: str | None, expected: str) -> None:
    assert safe_filename(raw) == expected


def test_overlong_names_keep_their_extension() -> None:
    name = safe_filename("长" * 200 + ".docx")
    assert name.endswith(".docx") and len(name.encode()) <= 255 - 16


def test_media_types() -> None:
    assert media_type("a.md") == "text/markdown"
    assert media_type("a.unknownext", "image/png") == "image/png"
    assert media_type("a.unknownext", "text/html; charset=x") == "text/html"
    assert media_type("a.unknownext", "bad type") == "application/octet-stream"
    assert media_type("noext") == "application/octet-stream"
