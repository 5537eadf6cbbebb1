"""``yuxi db …``: migrate the database, list its migrations, print its URL, dump it to
one file and restore it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from yuxi.cli.connect import database_url_or_exit, settings_or_exit

# The agents every yuxi database has, as (slug, name, backend, config, description):
# created when their slug is free, never changed once there (an operator may edit them)
BUILTIN_AGENTS: tuple[tuple[str, str, str, dict[str, Any], str], ...] = (
    (
        "chatbot",
        "Chatbot",
        "chatbot",
        {"context": {"model": "builtin:scripted"}},
        "A general assistant; its default model is the offline builtin:scripted",
    ),
)


def seed_agents_or_exit(url: str, *, wait: bool = False) -> list[str]:
    """Creates each built-in agent whose slug is free (``yuxi.agent_seed``), on every
    start path (``yuxi db migrate``, ``up``, ``api``, ``worker``); an existing one,
    edited or deleted, is left as it is. Returns the slugs created, each named on
    stderr. ``wait``: while the database cannot be reached, try again."""
    import asyncio
    import logging

    import psycopg
    from psycopg import AsyncConnection

    from yuxi.db.outages import until_reachable
    from yuxi.queue.agents import agent_seed
    from yuxi.queue.errors import QueueError

    async def seed() -> list[str]:
        async with await AsyncConnection.connect(url, autocommit=True) as conn:
            return [
                slug
                for slug, name, backend, config, description in BUILTIN_AGENTS
                if await agent_seed(conn, slug, name, backend, config, description)
            ]

    async def seeded() -> list[str]:
        if wait:
            log = logging.getLogger("yuxi.agents")
            return await until_reachable(seed, log=log, what="seed the built-in agents")
        return await seed()

    try:
        created = asyncio.run(seeded())
    except (QueueError, psycopg.Error) as error:
        raise click.ClickException(f"cannot seed the built-in agents: {error}") from None
    for slug in created:
        click.echo(f"created the built-in agent {slug}", err=True)
    return created


def migrate_or_exit(url: str) -> list[str]:
    """Applies what is missing, with progress on stderr; a refusal is a one-line error."""
    from yuxi.db.migrations import MigrationError, migrate

    try:
        return migrate(url, progress=lambda message: click.echo(message, err=True))
    except MigrationError as error:
        raise click.ClickException(str(error)) from None


def import_files_or_exit(url: str, home: Path) -> None:
    """Brings the files an older install kept under ``home`` into the file store, once
    per home (yuxi/files/importer.py), saying what it did and what it left out."""
    from yuxi.files.importer import import_needed

    if not import_needed(home):
        return
    from yuxi.db.pools import app_pool
    from yuxi.files.importer import import_home

    def say(message: str) -> None:
        click.echo(message, err=True)

    async def run() -> None:
        pool = app_pool(url, max_size=2)
        await pool.open(wait=True)
        try:
            report = await import_home(pool, home, progress=say)
        finally:
            await pool.close()
        if report.already:
            return
        if report.imported or report.skipped or report.left_out:
            say(
                f"files: imported {report.imported} ({report.bytes} bytes) from {home} into"
                f" the database; {report.skipped} were there already"
            )
        for line in report.left_out:
            say(f"files: left out {line}")

    import asyncio

    asyncio.run(run())


@click.group()
def db() -> None:
    """The database: migrate it, see its migrations, print its URL, dump and restore it."""


@db.command("migrate")
def db_migrate() -> None:
    """Apply yuxi's, procrastinate's and the LangGraph checkpointer's migrations, then
    create the built-in agents (`chatbot`) that are missing (never changing one), and
    bring the files an older install kept under YUXI_HOME into the database (once).

    Safe to run concurrently and repeatedly: runners take turns on an advisory lock
    and a second run finds nothing to do.
    """
    settings = settings_or_exit()
    url = database_url_or_exit(settings)
    applied = migrate_or_exit(url)
    seed_agents_or_exit(url)
    import_files_or_exit(url, settings.home.resolve())
    click.echo(f"applied {len(applied)} migration(s)" if applied else "database is up to date")


@db.command("status")
def db_status() -> None:
    """List every migration and whether it is applied, pending or edited."""
    from yuxi.db.migrations import status

    settings = settings_or_exit()
    rows = status(database_url_or_exit(settings))
    width = max(len(row.name) for row in rows)
    for row in rows:
        when = row.applied_at.strftime("%Y-%m-%d %H:%M:%S%z") if row.applied_at else ""
        click.echo(f"{row.name:<{width}}  {row.state:<8}  {when}".rstrip())
    click.echo(f"vector indexing: {_vector_search(database_url_or_exit(settings))}")
    if any(row.state in ("edited", "unknown") for row in rows):
        sys.exit(1)


def _vector_search(url: str) -> str:
    """What ``yuxi.kb_vector_status`` says, or why it cannot be asked."""
    import asyncio

    import psycopg

    from yuxi.queue.errors import QueueError
    from yuxi.queue.knowledge import kb_vector_status

    async def ask() -> str:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            return (await kb_vector_status(conn)).detail

    try:
        return asyncio.run(ask())
    except (psycopg.Error, QueueError):
        return "unknown (the knowledge migration is not applied)"
    except LookupError:
        return "unknown"


@db.command("url")
def db_url() -> None:
    """Print the database URL in use, e.g. for: psql "$(yuxi db url)"."""
    settings = settings_or_exit()
    click.echo(database_url_or_exit(settings))
    if not settings.database_url:
        click.echo(
            "note: the embedded server stops when the last yuxi process using it exits;"
            " keep `yuxi up` running while you use this URL",
            err=True,
        )


@db.command("dump")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def db_dump(file: Path) -> None:
    """Dump the whole database into FILE (pg_dump's custom format): users, agents,
    conversations, runs, events, checkpoints, the queue, models and sealed secrets.

    Uses the server's own pg_dump: the embedded wheel's for the embedded server, else a
    pg_dump on PATH (or the embedded wheel's) at least as new as the server. FILE is
    written to a temporary file next to it and renamed once complete: a failed dump
    leaves no file. Not in the dump: the server key (back it up apart) and the files
    under YUXI_HOME.
    """
    import psycopg

    from yuxi.db.dump import DumpError, dump

    settings = settings_or_exit()
    url = database_url_or_exit(settings)
    try:
        dump(url, file, embedded=not settings.database_url, progress=_say)
    except DumpError as error:
        raise click.ClickException(str(error)) from None
    except psycopg.Error as error:
        raise click.ClickException(f"cannot dump the database: {error}") from None


@db.command("restore")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--force",
    is_flag=True,
    help="Replace a database that already holds yuxi's state (dumped first to"
    " yuxi-before-restore-<time>.dump next to FILE).",
)
def db_restore(file: Path, force: bool) -> None:
    """Restore FILE (made by `yuxi db dump`) into the database in use, then migrate it,
    so that a dump of an older yuxi comes up to date.

    The restore is one transaction: it fails whole or not at all. A database that
    already holds yuxi's state is refused unless --force; with it, the current state is
    dumped to a safety file first, then replaced. Stop every yuxi process using the
    database first (a restore with other sessions connected is refused).
    """
    import psycopg

    from yuxi.cli.server_key import restored_key_note
    from yuxi.db.dump import DumpError, restore

    settings = settings_or_exit()
    url = database_url_or_exit(settings)
    try:
        restore(url, file, embedded=not settings.database_url, replace=force, progress=_say)
    except DumpError as error:
        raise click.ClickException(str(error)) from None
    except psycopg.Error as error:
        raise click.ClickException(f"cannot restore the database: {error}") from None
    _say("restored; bringing the schema up to date")
    applied = migrate_or_exit(url)
    _say(f"applied {len(applied)} migration(s)" if applied else "the schema is up to date")
    restored_key_note(settings, url)
    click.echo(f"restored {file}")


def _say(message: str) -> None:
    click.echo(message, err=True)
