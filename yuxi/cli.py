"""The ``yuxi`` command."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from uuid import UUID

import click
from psycopg import AsyncConnection

from yuxi.accounts import create_user
from yuxi.api.server import ListenError
from yuxi.cli_operator import agent, queue, user_list
from yuxi.cli_support import database_url_or_exit, settings_or_exit
from yuxi.db.migrations import MigrationError, migrate, status
from yuxi.queue.errors import QueueError


def _migrate(url: str) -> list[str]:
    try:
        return migrate(url, progress=lambda message: click.echo(message, err=True))
    except MigrationError as error:
        raise click.ClickException(str(error)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """yuxi: LangGraph agents behind an HTTP API, with PostgreSQL as the only dependency.

    Configuration comes from the environment: YUXI_HOME (default ./.yuxi),
    YUXI_DATABASE_URL (an external PostgreSQL; the embedded one under YUXI_HOME
    otherwise), YUXI_HOST and YUXI_PORT.
    """


@main.command()
@click.option("--port", type=int, default=None, help="HTTP port (default: YUXI_PORT or 8000).")
def up(port: int | None) -> None:
    """Run everything in one process: PostgreSQL (embedded unless YUXI_DATABASE_URL is
    set), migrations, the default `chatbot` agent and an `admin` user on first start,
    the HTTP API and a worker. Ctrl-C stops it cleanly; a restart keeps all data."""
    stop = _catch_stop_signals()
    settings = settings_or_exit(port)
    where = (
        "external database"
        if settings.database_url
        else f"embedded PostgreSQL in {settings.pgdata}"
    )
    click.echo(f"starting {where}", err=True)
    url = database_url_or_exit(settings)
    _migrate(url)
    _configure_logging()
    admin_token = asyncio.run(_seed(url))
    click.echo(f"database: {url}")
    click.echo(f"api: http://{settings.host}:{settings.port}")
    if admin_token:
        click.echo(f"admin token (shown once): {admin_token}")
    click.echo("API and worker running; press Ctrl-C to stop", err=True)
    from yuxi.api.server import serve_api
    from yuxi.worker.app import run_worker

    async def everything() -> None:
        await _together(
            serve_api(url, settings), run_worker(url, settings, install_signal_handlers=False)
        )

    _run_until_stopped(everything, stop)
    click.echo("stopped", err=True)


@main.command()
@click.option("--port", type=int, default=None, help="HTTP port (default: YUXI_PORT or 8000).")
def api(port: int | None) -> None:
    """Serve the HTTP API only (run workers separately with `yuxi worker`)."""
    stop = _catch_stop_signals()
    settings = settings_or_exit(port)
    url = database_url_or_exit(settings)
    _configure_logging()
    from yuxi.api.server import serve_api

    click.echo(f"api: http://{settings.host}:{settings.port}")
    _run_until_stopped(lambda: serve_api(url, settings), stop)


async def _together(*services: Awaitable[None]) -> None:
    """Runs services side by side; when one ends or fails, the others are stopped."""
    tasks = [asyncio.ensure_future(service) for service in services]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _seed(url: str) -> str | None:
    """The default agent and, while there is no admin, an `admin` user; returns the new
    admin's token (shown once)."""

    async with await AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            "SELECT yuxi.agent_seed('chatbot', 'Chatbot', 'chatbot',"
            ' \'{"context": {"model": "builtin:scripted"}}\'::jsonb,'
            " 'A general assistant; its default model is the offline builtin:scripted')"
        )
        cur = await conn.execute(
            "SELECT count(*) FROM yuxi.users WHERE deleted_at IS NULL AND is_admin"
        )
        row = await cur.fetchone()
        if row is not None and row[0] > 0:
            return None
        try:
            _uid, token = await create_user(conn, "admin", is_admin=True)
        except QueueError as error:  # a non-admin user already has the name
            click.echo(f"no admin user was created: {error}", err=True)
            return None
        return token


@main.group()
def user() -> None:
    """Users and their API tokens."""


@user.command("create")
@click.argument("name")
@click.option("--admin", is_flag=True, help="The user may manage agents.")
def user_create(name: str, admin: bool) -> None:
    """Create user NAME; prints a new API token as the last line (shown only once)."""
    settings = settings_or_exit()
    url = database_url_or_exit(settings)

    async def create() -> tuple[UUID, str]:

        async with await AsyncConnection.connect(url, autocommit=True) as conn:
            return await create_user(conn, name, is_admin=admin)

    try:
        uid, token = asyncio.run(create())
    except QueueError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"created {'admin ' if admin else ''}user {name} ({uid})", err=True)
    click.echo(token)


@main.command()
def worker() -> None:
    """Run a worker: execute runs delivered from the queue, reconcile expired leases and
    re-deliver lost deliveries. Run as many as you like against one PostgreSQL.

    SIGINT/SIGTERM stop taking runs; running ones get YUXI_SHUTDOWN_GRACE_SECONDS to
    finish and are then released for another worker.
    """
    from yuxi.worker.app import run_worker

    stop = _catch_stop_signals()
    settings = settings_or_exit()
    url = database_url_or_exit(settings)
    _configure_logging()
    click.echo(f"worker running ({settings.worker_concurrency} at once); Ctrl-C to stop", err=True)
    _run_until_stopped(lambda: run_worker(url, settings, install_signal_handlers=False), stop)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _catch_stop_signals() -> threading.Event:
    """From the first moment, SIGINT/SIGTERM mean "stop cleanly", never a traceback."""
    stop = threading.Event()
    for signum in _STOP_SIGNALS:
        signal.signal(signum, lambda *_: stop.set())
    return stop


def _run_until_stopped(service: Callable[[], Awaitable[None]], stop: threading.Event) -> None:
    """Runs ``service`` until SIGINT/SIGTERM; cancelling it is its graceful shutdown
    (the worker lets runs finish within the grace period, then releases them)."""

    async def main() -> None:
        task = asyncio.ensure_future(service())
        loop = asyncio.get_running_loop()
        for signum in _STOP_SIGNALS:
            loop.add_signal_handler(signum, task.cancel)
        if stop.is_set():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    try:
        asyncio.run(main())
    except ListenError as error:
        raise click.ClickException(str(error)) from None
    # Ctrl-C under `uv run` can arrive twice (the terminal and uv both send it); once
    # stopped, a repeat must not interrupt the embedded server's clean shutdown at exit.
    for signum in _STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def _configure_logging() -> None:
    logging.basicConfig(
        level=os.environ.get("YUXI_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # procrastinate logs each job's start and end at INFO, the maintenance jobs of
        # every few seconds included; yuxi logs each run's outcome itself
        logging.getLogger("procrastinate").setLevel(logging.WARNING)


@main.group()
def db() -> None:
    """The database: migrate it, see its migrations, print its URL."""


@db.command("migrate")
def db_migrate() -> None:
    """Apply yuxi's, procrastinate's and the LangGraph checkpointer's migrations.

    Safe to run concurrently and repeatedly: runners take turns on an advisory lock
    and a second run finds nothing to do.
    """
    settings = settings_or_exit()
    applied = _migrate(database_url_or_exit(settings))
    click.echo(f"applied {len(applied)} migration(s)" if applied else "database is up to date")


@db.command("status")
def db_status() -> None:
    """List every migration and whether it is applied, pending or edited."""
    settings = settings_or_exit()
    rows = status(database_url_or_exit(settings))
    width = max(len(row.name) for row in rows)
    for row in rows:
        when = row.applied_at.strftime("%Y-%m-%d %H:%M:%S%z") if row.applied_at else ""
        click.echo(f"{row.name:<{width}}  {row.state:<8}  {when}".rstrip())
    if any(row.state in ("edited", "unknown") for row in rows):
        sys.exit(1)


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


main.add_command(agent)
main.add_command(queue)
user.add_command(user_list)


if __name__ == "__main__":
    main()
