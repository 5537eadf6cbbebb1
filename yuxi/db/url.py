"""Deciding which PostgreSQL a process talks to."""

from __future__ import annotations

from yuxi.db.embedded import embedded_url
from yuxi.settings import Settings


def database_url(settings: Settings) -> str:
    """YUXI_DATABASE_URL when set, else the embedded server under YUXI_HOME."""
    if settings.database_url:
        return settings.database_url
    return embedded_url(settings.pgdata)
