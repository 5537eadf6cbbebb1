"""What every ``yuxi`` command needs: the settings, the database, and plain output. Problems
are reported as one-line click errors, never a traceback."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from yuxi.settings import Settings, SettingsError

if TYPE_CHECKING:
    import psycopg
    from psycopg import AsyncConnection

# The driver, msgspec and the queue are imported by the commands that use them, so
# `yuxi --help` and usage errors answer at once.

T = TypeVar("T")
JSON_HELP = "Print JSON instead of a table (for scripts)."


def settings_or_exit(port: int | None = None) -> Settings:
    try:
        settings = Settings.from_env()
        if port is not None:
            settings = dataclasses.replace(settings, port=port).validated()
        return settings
    except SettingsError as error:
        raise click.ClickException(str(error)) from None


def database_url_or_exit(settings: Settings) -> str:
    from yuxi.db.url import database_url

    try:
        return database_url(settings)
    except Exception as error:
        where = (
            "YUXI_DATABASE_URL"
            if settings.database_url
            else f"the embedded server in {settings.pgdata}"
        )
        raise click.ClickException(f"cannot reach PostgreSQL ({where}): {error}") from None


def with_database(work: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
    """Runs ``work`` on one autocommit connection to the database in use. A refusal by
    the database becomes a one-line error and exit code 1, never a traceback."""
    import psycopg
    from psycopg import AsyncConnection

    from yuxi.queue.errors import QueueError

    url = database_url_or_exit(settings_or_exit())

    async def run() -> T:
        async with await AsyncConnection.connect(url, autocommit=True) as conn:
            return await work(conn)

    try:
        return asyncio.run(run())
    except QueueError as error:
        raise click.ClickException(str(error)) from None
    except (psycopg.errors.UndefinedFunction, psycopg.errors.InvalidSchemaName) as error:
        raise click.ClickException(
            f"{_database_message(error)} (run `yuxi db migrate` to bring the schema up to date)"
        ) from None
    except psycopg.Error as error:
        raise click.ClickException(_database_message(error)) from None


def _database_message(error: psycopg.Error) -> str:
    """The error on one line (a connection failure's message spans several)."""
    primary = error.diag.message_primary if error.diag else None
    lines = [line.strip() for line in (primary or str(error)).splitlines() if line.strip()]
    return "; ".join(lines) or type(error).__name__


def echo_json(value: Any) -> None:
    import msgspec

    click.echo(msgspec.json.format(msgspec.json.encode(value), indent=2).decode())


def echo_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Left-aligned columns two spaces apart, a header line first."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    for line in (headers, *rows):
        cells = (cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        click.echo("  ".join(cells).rstrip())


def when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def cell(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def preview(text: str | None, width: int = 40) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
