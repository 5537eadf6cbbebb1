"""``yuxi up``, ``yuxi api``, ``yuxi worker``: the long-running processes, what they do
before they serve (``_ready``), their signals and their logging."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import os
import signal
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import click

from yuxi.cli.connect import database_url_or_exit, settings_or_exit
from yuxi.cli.db import import_files_or_exit, migrate_or_exit, seed_agents_or_exit
from yuxi.cli.server_key import server_key_or_exit
from yuxi.settings import Settings


@click.command()
@click.option("--port", type=int, default=None, help="HTTP port (default: YUXI_PORT or 8000).")
@click.option(
    "--graphs",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="Serve the graphs of this LangGraph project (its langgraph.json, or the directory"
    " holding it) as agents (default: YUXI_GRAPHS).",
)
def up(port: int | None, graphs: Path | None) -> None:
    """Run everything in one process: PostgreSQL (embedded unless YUXI_DATABASE_URL is
    set), migrations, the default `chatbot` agent and an `admin` user on first start,
    the HTTP API and a worker. Ctrl-C stops it cleanly; a restart keeps all data."""
    gc.disable()  # until the API has started: see serve_api
    stop = _catch_stop_signals()
    settings = settings_or_exit(port)
    if graphs is not None:
        settings = dataclasses.replace(settings, graphs=graphs)
    _graphs_or_exit(settings)
    where = (
        "external database"
        if settings.database_url
        else f"embedded PostgreSQL in {settings.pgdata}"
    )
    click.echo(f"starting {where}", err=True)
    url = database_url_or_exit(settings)
    migrate_or_exit(url)
    import_files_or_exit(url, settings.home.resolve())
    _configure_logging()
    _ready(settings, url)
    admin_token, login_code = asyncio.run(_seed_admin(url))
    base_url = f"http://{settings.host}:{settings.port}"
    click.echo(f"database: {url}")
    click.echo(f"api: {base_url}")
    click.echo(f"console: {base_url}/")
    if admin_token:
        click.echo(f"admin token (shown once): {admin_token}")
    if login_code:
        from yuxi.queue.login_codes import LOGIN_CODE_TTL, login_link

        minutes = int(LOGIN_CODE_TTL.total_seconds() // 60)
        click.echo(
            f"admin login link (single use, {minutes} minutes): {login_link(base_url, login_code)}"
        )
    click.echo("API and worker running; press Ctrl-C to stop", err=True)
    from yuxi.api.server import serve_api
    from yuxi.worker.app import run_worker

    async def everything() -> None:
        await _together(
            serve_api(url, settings), run_worker(url, settings, install_signal_handlers=False)
        )

    _run_until_stopped(everything, stop)
    click.echo("stopped", err=True)


@click.command()
@click.option("--port", type=int, default=None, help="HTTP port (default: YUXI_PORT or 8000).")
def api(port: int | None) -> None:
    """Serve the HTTP API only (run workers separately with `yuxi worker`). Waits for the
    database, checks the server key and seeds the missing built-in agents first."""
    gc.disable()  # until the API has started: see serve_api
    stop = _catch_stop_signals()
    settings = settings_or_exit(port)
    _graphs_or_exit(settings)
    url = database_url_or_exit(settings)
    _configure_logging()
    _ready(settings, url)
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


def _graphs_or_exit(settings: Settings) -> None:
    """A project given (--graphs, YUXI_GRAPHS) must have a usable langgraph.json; its
    graphs are imported later (one that fails fails its own runs)."""
    if settings.graphs is None:
        return
    from yuxi.agents.project import ProjectError, read_project

    try:
        read_project(settings.graphs)
    except ProjectError as error:
        raise click.ClickException(str(error)) from None


def _ready(settings: Settings, url: str) -> None:
    """What every serving process does before it serves, once its database answers (it
    waits for it): the server key is checked against the database's (recorded on first
    start; another key exits with an error), and the built-in agents that are missing
    are created."""
    server_key_or_exit(settings, url, wait=True)
    seed_agents_or_exit(url, wait=True)


async def _seed_admin(url: str) -> tuple[str | None, str | None]:
    """While there is no admin, an `admin` user; returns the new admin's token and a
    console login code for it (both shown once), or two Nones."""

    from psycopg import AsyncConnection

    from yuxi.queue.errors import QueueError
    from yuxi.queue.login_codes import login_code_create
    from yuxi.queue.users import token_authenticate, user_seed_admin

    async with await AsyncConnection.connect(url, autocommit=True) as conn:
        try:
            token = await user_seed_admin(conn, "admin")
        except QueueError as error:  # a non-admin user already has the name
            click.echo(f"no admin user was created: {error}", err=True)
            return None, None
        if token is None:
            return None, None
        admin = await token_authenticate(conn, token)
        assert admin is not None, "the admin just created"
        return token, await login_code_create(conn, admin.uid)


@click.command()
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Serve this worker's Prometheus metrics at http://HOST:PORT/metrics.",
)
@click.option(
    "--metrics-host",
    default=None,
    help="The address --metrics-port listens on (default: YUXI_HOST or 127.0.0.1).",
)
def worker(metrics_port: int | None, metrics_host: str | None) -> None:
    """Run a worker: execute runs delivered from the queue, reconcile expired leases and
    re-deliver lost deliveries. Run as many as you like against one PostgreSQL (with the
    same server key). Waits for the database, checks the server key and seeds the
    missing built-in agents first.

    SIGINT/SIGTERM stop taking runs; running ones get YUXI_SHUTDOWN_GRACE_SECONDS to
    finish and are then released for another worker.
    """
    from yuxi.worker.app import run_worker

    stop = _catch_stop_signals()
    settings = settings_or_exit()
    _graphs_or_exit(settings)
    url = database_url_or_exit(settings)
    _configure_logging()
    _ready(settings, url)
    if metrics_port is not None:
        _serve_worker_metrics(metrics_port, metrics_host or settings.host)
    click.echo(f"worker running ({settings.worker_concurrency} at once); Ctrl-C to stop", err=True)
    _run_until_stopped(lambda: run_worker(url, settings, install_signal_handlers=False), stop)


def _serve_worker_metrics(port: int, host: str) -> None:
    from yuxi.worker.metrics import serve_worker_metrics

    try:
        serve_worker_metrics(port, host)
    except OSError as error:
        raise click.ClickException(
            f"cannot serve metrics on {host}:{port}: {error.strerror or error}"
        ) from None
    click.echo(f"metrics: http://{host}:{port}/metrics", err=True)


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

    from yuxi.api.server import ListenError

    try:
        with asyncio.Runner(loop_factory=_event_loop_factory()) as runner:
            runner.run(main())
    except ListenError as error:
        raise click.ClickException(str(error)) from None
    # Ctrl-C under `uv run` can arrive twice (the terminal and uv both send it); once
    # stopped, a repeat must not interrupt the embedded server's clean shutdown at exit.
    for signum in _STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def _event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop for the serving processes (a database round trip costs a
    third less CPU than on asyncio's, a run 13% less: docs/benchmarks/http_runs.md);
    asyncio's own with YUXI_EVENT_LOOP=asyncio or where uvloop is not installed."""
    if os.environ.get("YUXI_EVENT_LOOP", "uvloop").lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _configure_logging() -> None:
    logging.basicConfig(
        level=os.environ.get("YUXI_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # procrastinate logs each job's start and end at INFO, the maintenance jobs of
        # every few seconds included; yuxi logs each run's outcome itself
        logging.getLogger("procrastinate").setLevel(logging.WARNING)
