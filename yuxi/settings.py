"""One Settings object, read from YUXI_* environment variables."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be an integer, got {raw!r}") from None


class SettingsError(ValueError):
    """A YUXI_* variable has a value yuxi cannot use."""


@dataclass(frozen=True)
class Settings:
    """Process-wide configuration. Every field has a production default."""

    home: Path = field(default_factory=lambda: Path(".yuxi"))
    database_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    pool_min_size: int = 1
    pool_max_size: int = 10

    @property
    def pgdata(self) -> Path:
        """Data directory of the embedded PostgreSQL server."""
        return self.home / "pgdata"

    @classmethod
    def from_env(cls) -> Settings:
        """Reads the environment; unset variables keep their defaults."""
        return cls(
            home=Path(os.environ.get("YUXI_HOME") or ".yuxi"),
            database_url=os.environ.get("YUXI_DATABASE_URL") or None,
            host=os.environ.get("YUXI_HOST") or "127.0.0.1",
            port=_env_int("YUXI_PORT", 8000),
            pool_min_size=_env_int("YUXI_POOL_MIN_SIZE", 1),
            pool_max_size=_env_int("YUXI_POOL_MAX_SIZE", 10),
        )
