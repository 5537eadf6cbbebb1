"""Dumping the whole database to one file and restoring it, with the server's own
``pg_dump`` and ``pg_restore`` (``yuxi db dump``, ``yuxi db restore``).

Which programs: for the embedded server, the ones its wheel ships (the same version);
for another server, the first of ``pg_dump`` on PATH and the embedded wheel's whose
major version is at least the server's (a ``pg_dump`` refuses a newer server). None
fitting is an error that says which version is needed.

A dump is custom format (``-Fc``), written to a temporary file next to the target and
renamed into place once ``pg_dump`` succeeded: a failed dump leaves no file, and an
older dump of the same name stays whole until the new one is complete.

A restore goes into the database in use, in one transaction (``--single-transaction``),
without owners or privileges (the restoring role owns what it creates). A database
that already holds yuxi's state (schema ``yuxi``, procrastinate's, the checkpointer's or
the store's tables) is refused unless ``replace``: then the current state is first
dumped to a safety file next to the one restored, schema ``yuxi`` is dropped, and
``pg_restore --clean`` replaces the rest. Other sessions on the database refuse a
restore either way (stop yuxi first). The caller migrates afterwards, so an older dump
comes up to date.

Passwords travel in ``PGPASSWORD``, never on a command line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from psycopg import conninfo

from yuxi.db.embedded import embedded_bin_dir

_VERSION = re.compile(r"\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?")
# what tells a database holds yuxi's state, besides schema yuxi
_STATE_TABLES = ("public.procrastinate_jobs", "public.checkpoints", "public.store")


class DumpError(RuntimeError):
    """A dump or restore that cannot be done, or failed; the message says why (never a
    password)."""


@dataclass(frozen=True)
class PgTool:
    """A PostgreSQL client program and its version."""

    path: Path
    version: str  # e.g. "18.6"

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


def tool_version(path: Path) -> PgTool | None:
    """``path --version`` read, or None when it does not run or says no version."""
    try:
        out = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except OSError:
        return None
    match = _VERSION.search(out)
    if match is None:
        return None
    return PgTool(path, match.group(1) + (f".{match.group(2)}" if match.group(2) else ""))


def candidates(name: str, *, embedded: bool) -> list[Path]:
    """Where to look for ``name``: the embedded wheel's for its server; otherwise PATH's
    first, then the embedded wheel's."""
    bundled = embedded_bin_dir()
    found: list[Path] = []
    on_path = None if embedded else shutil.which(name)
    if on_path:
        found.append(Path(on_path))
    if bundled is not None and (bundled / name).is_file():
        found.append(bundled / name)
    return found


def choose_tool(name: str, server_major: int, paths: Sequence[Path]) -> PgTool:
    """The first of ``paths`` whose major version is at least the server's."""
    tools = [tool for tool in map(tool_version, paths) if tool is not None]
    for tool in tools:
        if tool.major >= server_major:
            return tool
    found = ", ".join(f"{t.path} is {t.version}" for t in tools) or f"no {name} was found"
    raise DumpError(
        f"{name} {server_major} or newer is needed for this PostgreSQL {server_major} server"
        f" ({found}); install the PostgreSQL {server_major} client programs"
        f" (e.g. postgresql-client-{server_major}) and put that {name} first on PATH"
    )


def server_major(url: str) -> int:
    """The server's major version (``server_version_num`` / 10000)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT current_setting('server_version_num')::int").fetchone()
    assert row is not None
    return int(row[0]) // 10000


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def dump(
    url: str,
    target: Path,
    *,
    embedded: bool,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Dumps the database at ``url`` into ``target`` (custom format); returns its size.
    A failure leaves neither ``target`` (an older file of that name stays as it was) nor
    a temporary file."""
    say = progress or (lambda _message: None)
    tool = choose_tool("pg_dump", server_major(url), candidates("pg_dump", embedded=embedded))
    target = target.expanduser()
    if target.is_dir():
        raise DumpError(f"{target} is a directory; name the dump file")
    if not target.parent.is_dir():
        raise DumpError(f"{target.parent} does not exist")
    say(f"dumping {where(url, embedded)} with pg_dump {tool.version} ({tool.path})")
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    os.close(fd)
    partial = Path(name)
    try:
        _run(tool, url, ["--format=custom", "--no-password", f"--file={partial}"])
        with partial.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    size = target.stat().st_size
    say(f"wrote {target} ({human_size(size)})")
    return size


def holds_state(url: str) -> list[str]:
    """What of yuxi's state the database at ``url`` holds (schema yuxi, procrastinate's,
    the checkpointer's and the store's tables), by name; empty for a database yuxi never
    used."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT to_regnamespace('yuxi') IS NOT NULL, "
            + ", ".join("to_regclass(%s) IS NOT NULL" for _ in _STATE_TABLES),
            _STATE_TABLES,
        ).fetchone()
    assert row is not None
    names = ("schema yuxi", *_STATE_TABLES)
    return [name for name, present in zip(names, row, strict=True) if present]


def other_sessions(url: str) -> int:
    """How many other client sessions are connected to the database at ``url``."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def restore(
    url: str,
    source: Path,
    *,
    embedded: bool,
    replace: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Path | None:
    """Restores the dump ``source`` into the database at ``url`` in one transaction.
    Refuses a database that holds yuxi's state unless ``replace``; then the current
    state is dumped first to a safety file next to ``source``, whose path is returned.
    Migrating the result is the caller's."""
    say = progress or (lambda _message: None)
    source = source.expanduser()
    if not source.is_file():
        raise DumpError(f"{source}: no such file")
    major = server_major(url)
    tool = _reader(source, major, candidates("pg_restore", embedded=embedded))
    present = holds_state(url)
    if present and not replace:
        raise DumpError(
            f"{where(url, embedded)} already holds yuxi's state ({', '.join(present)});"
            " restoring there would replace it: give --force to replace it (the current"
            " state is dumped to a safety file first), or restore into an empty database"
        )
    sessions = other_sessions(url)
    if sessions:
        raise DumpError(
            f"{sessions} other session(s) are connected to {where(url, embedded)}: stop"
            " every yuxi process using it (up, api, worker) before restoring"
        )
    safety = None
    if present:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        safety = source.parent / f"yuxi-before-restore-{stamp}.dump"
        say(f"saving the current state to {safety} first")
        dump(url, safety, embedded=embedded, progress=say)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA yuxi CASCADE")
    say(
        f"restoring {source} ({human_size(source.stat().st_size)}) into"
        f" {where(url, embedded)} with pg_restore {tool.version} ({tool.path})"
    )
    options = ["--single-transaction", "--no-owner", "--no-privileges", "--no-password"]
    if present:
        options += ["--clean", "--if-exists"]
    try:
        _run(tool, url, [*options, str(source)])
    except DumpError as error:
        if safety is None:
            raise DumpError(f"{error}; nothing was restored") from None
        raise DumpError(
            f"{error}; the database's former state is in {safety}"
            f" (`yuxi db restore --force {safety}` brings it back)"
        ) from None
    return safety


def where(url: str, embedded: bool) -> str:
    """The database for a message: no password, no socket path."""
    params = conninfo.conninfo_to_dict(url)
    name = params.get("dbname") or "postgres"
    if embedded:
        return f"the embedded database {name}"
    host = params.get("host") or "localhost"
    return f"database {name} on {host}"


def _reader(source: Path, major: int, paths: Sequence[Path]) -> PgTool:
    """A ``pg_restore`` fit for the server that reads ``source`` (an archive made by a
    newer ``pg_dump`` is unreadable to an older ``pg_restore``)."""
    tool = choose_tool("pg_restore", major, paths)
    readers = [tool, *(t for t in map(tool_version, paths) if t and t.major > tool.major)]
    error = ""
    for reader in readers:
        listed = subprocess.run(
            [str(reader.path), "--list", str(source)],
            capture_output=True,
            text=True,
            check=False,
        )
        if listed.returncode == 0:
            return reader
        error = _last_line(listed.stderr)
    raise DumpError(f"{source} is not a dump pg_restore {tool.version} can read: {error}")


def _run(tool: PgTool, url: str, arguments: list[str]) -> None:
    """Runs ``tool`` on the database at ``url``; its error output becomes a DumpError."""
    params = conninfo.conninfo_to_dict(url)
    password = params.pop("password", None)
    env = dict(os.environ)
    if password:
        env["PGPASSWORD"] = str(password)
    dsn = conninfo.make_conninfo(**{k: str(v) for k, v in params.items() if v is not None})
    done = subprocess.run(
        [str(tool.path), f"--dbname={dsn}", *arguments],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise DumpError(f"{tool.path.name} failed: {_last_line(done.stderr)}")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or ["no output"])[-1]
