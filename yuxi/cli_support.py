"""What every ``yuxi`` command needs: the settings and the database URL, with problems
reported as one-line click errors."""

from __future__ import annotations

import dataclasses

import click

from yuxi.db.url import database_url
from yuxi.settings import Settings, SettingsError


def settings_or_exit(port: int | None = None) -> Settings:
    try:
        settings = Settings.from_env()
        if port is not None:
            settings = dataclasses.replace(settings, port=port).validated()
        return settings
    except SettingsError as error:
        raise click.ClickException(str(error)) from None


def database_url_or_exit(settings: Settings) -> str:
    try:
        return database_url(settings)
    except Exception as error:
        where = (
            "YUXI_DATABASE_URL"
            if settings.database_url
            else f"the embedded server in {settings.pgdata}"
        )
        raise click.ClickException(f"cannot reach PostgreSQL ({where}): {error}") from None
