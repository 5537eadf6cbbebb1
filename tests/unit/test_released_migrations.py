"""Released migrations never change. ``sql/migrations/RELEASED`` lists every migration a
release shipped with the SHA-256 of its file, one ``<sha256-hex>  <file name>`` line
each (``sha256sum`` format: ``cd sql/migrations && sha256sum -c RELEASED`` checks it); a
listed migration that differs or is missing fails here, naming the file. Where the
repository has release tags (``v*``), a migration the newest tag has that changed since
fails too; without git or tags (a source tarball, a shallow clone) that part is left
out without a word."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

from yuxi.db.migrations import load_migrations

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = ROOT / "sql" / "migrations"
RELEASED = MIGRATIONS / "RELEASED"
_LINE = re.compile(r"([0-9a-f]{64})  (\d{4}_[a-z0-9_]+\.sql)")
_FIX = "a released migration never changes: put it back and fix the mistake with a new delta"


def released() -> dict[str, str]:
    """File name -> SHA-256 hex, in the order RELEASED lists them."""
    digests: dict[str, str] = {}
    for number, line in enumerate(RELEASED.read_text(encoding="utf-8").splitlines(), 1):
        match = _LINE.fullmatch(line)
        assert match, f"RELEASED:{number}: not '<sha256-hex>  NNNN_name.sql': {line!r}"
        digest, name = match.groups()
        assert name not in digests, f"RELEASED:{number}: {name} is listed twice"
        digests[name] = digest
    return digests


def test_released_migrations_are_unchanged() -> None:
    problems = []
    for name, digest in released().items():
        path = MIGRATIONS / name
        if not path.is_file():
            problems.append(f"sql/migrations/{name}: released, and missing")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            problems.append(f"sql/migrations/{name}: released, and changed since")
    assert not problems, "\n".join([*problems, _FIX])


def test_released_migrations_are_the_first_ones_in_order() -> None:
    names = list(released())
    shipped = [m.name for m in load_migrations(MIGRATIONS)]
    assert names, "RELEASED lists no migration"
    assert names == shipped[: len(names)], (
        "RELEASED lists the first migrations in order, each once; an unreleased one comes"
        f" after every released one (RELEASED: {names[-1]}, sql/migrations/: {shipped})"
    )


def test_the_runner_records_the_released_digests() -> None:
    """The checksum the runner records in yuxi.schema_migrations (and ``yuxi db status``
    compares) is the file's SHA-256 too: the text it reads is the file's bytes."""
    digests = released()
    for migration in load_migrations(MIGRATIONS):
        if migration.name in digests:
            assert migration.checksum == digests[migration.name], (
                f"sql/migrations/{migration.name}: the runner's checksum is not the file's"
                " SHA-256 (a file must be UTF-8 with LF line ends)"
            )


def _git(*args: str) -> str | None:
    """git's output in the repository, or None where there is no git or no repository."""
    if shutil.which("git") is None:
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def test_migrations_of_the_newest_release_tag_are_unchanged() -> None:
    top = _git("rev-parse", "--show-toplevel")
    tags = (_git("tag", "--list", "v*", "--sort=-v:refname") or "").split()
    if top is None or Path(top.strip()).resolve() != ROOT or not tags:
        return  # no git, no repository or no release yet: RELEASED alone says what shipped
    tag = tags[0]
    changed = _git(
        "diff", "--no-renames", "--name-status", "--diff-filter=DMT", tag, "--",
        "sql/migrations/*.sql",
    )  # fmt: skip
    assert changed is not None, f"git diff {tag} failed"
    problems = [
        f"{path}: released in {tag}, and {'missing' if status == 'D' else 'changed since'}"
        for status, path in (line.split("\t", 1) for line in changed.splitlines())
    ]
    assert not problems, "\n".join([*problems, _FIX])
    at_tag = _git("ls-tree", "--name-only", tag, "sql/migrations/") or ""
    listed = released()
    unlisted = [
        Path(path).name
        for path in at_tag.split()
        if path.endswith(".sql") and Path(path).name not in listed
    ]
    assert not unlisted, (
        f"released in {tag} but not in sql/migrations/RELEASED: {', '.join(unlisted)};"
        " append their digests (see CONTRIBUTING.md, Migrations)"
    )
