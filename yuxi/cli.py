"""The ``yuxi`` command."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading

import click

from yuxi.db.migrations import MigrationError, migrate, status
from yuxi.db.url import database_url
from yuxi.settings import Settings, SettingsError


def _settings() -> Settings:
    try:
        return Settings.from_env()
    except SettingsError as error:
        raise click.ClickException(str(error)) from None


def _url(settings: Settings) -> str:
    try:
        return database_url(settings)
    except Exception as error:
        where = (
            "YUXI_DATABASE_URL"
            if settings.database_url
            else f"the embedded server in {settings.pgdata}"
        )
        raise click.ClickException(f"cannot reach PostgreSQL ({where}): {error}") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """yuxi: LangGraph agents behind an HTTP API, with PostgreSQL as the only dependency.

    Configuration comes from the environment: YUXI_HOME (default ./.yuxi),
    YUXI_DATABASE_URL (an external PostgreSQL; the embedded one under YUXI_HOME
    otherwise), YUXI_HOST and YUXI_PORT.
    """


@main.command()
def up() -> None:
    """Start PostgreSQL (embedded unless YUXI_DATABASE_URL is set), migrate it and keep
    it running until Ctrl-C. Restarting keeps all data."""
    settings = _settings()
    where = (
        "external database"
        if settings.database_url
        else f"embedded PostgreSQL in {settings.pgdata}"
    )
    click.echo(f"starting {where}", err=True)
    url = _url(settings)
    try:
        migrate(url, progress=lambda message: click.echo(message, err=True))
    except MigrationError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"database ready: {url}")
    click.echo("press Ctrl-C to stop", err=True)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    click.echo("stopped", err=True)


@main.command()
def worker() -> None:
    """Run a worker: execute runs delivered from the queue, reconcile expired leases and
    re-deliver lost deliveries. Run as many as you like against one PostgreSQL.

    SIGINT/SIGTERM stop taking runs; running ones get YUXI_SHUTDOWN_GRACE_SECONDS to
    finish and are then released for another worker.
    """
    from yuxi.worker.app import run_worker

    settings = _settings()
    url = _url(settings)
    _configure_logging()
    click.echo(f"worker running ({settings.worker_concurrency} at once); Ctrl-C to stop", err=True)
    asyncio.run(run_worker(url, settings))


def _configure_logging() -> None:
    logging.basicConfig(
        level=os.environ.get("YUXI_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@main.group()
def db() -> None:
    """The database: migrate it, see its migrations, print its URL."""


@db.command("migrate")
def db_migrate() -> None:
    """Apply yuxi's, procrastinate's and the LangGraph checkpointer's migrations.

    Safe to run concurrently and repeatedly: runners take turns on an advisory lock
    and a second run finds nothing to do.
    """
    settings = _settings()
    url = _url(settings)
    try:
        applied = migrate(url, progress=lambda message: click.echo(message, err=True))
    except MigrationError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"applied {len(applied)} migration(s)" if applied else "database is up to date")


@db.command("status")
def db_status() -> None:
    """List every migration and whether it is applied, pending or edited."""
    settings = _settings()
    rows = status(_url(settings))
    width = max(len(row.name) for row in rows)
    for row in rows:
        when = row.applied_at.strftime("%Y-%m-%d %H:%M:%S%z") if row.applied_at else ""
        click.echo(f"{row.name:<{width}}  {row.state:<8}  {when}".rstrip())
    if any(row.state in ("edited", "unknown") for row in rows):
        sys.exit(1)


@db.command("url")
def db_url() -> None:
    """Print the database URL in use, e.g. for: psql "$(yuxi db url)"."""
    settings = _settings()
    click.echo(_url(settings))
    if not settings.database_url:
        click.echo(
            "note: the embedded server stops when the last yuxi process using it exits;"
            " keep `yuxi up` running while you use this URL",
            err=True,
        )


if __name__ == "__main__":
    main()
