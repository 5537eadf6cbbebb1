"""One Settings object, read from YUXI_* environment variables."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number, got {raw!r}") from None


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


# an origin as a browser sends it: scheme://host[:port], nothing after
_ORIGIN = re.compile(r"https?://(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9.-]*[a-z0-9])?)(:[0-9]{1,5})?")


def _env_origins(name: str) -> tuple[str, ...]:
    raw = os.environ.get(name) or ""
    return tuple(part.strip() for part in raw.split(",") if part.strip())


@dataclass(frozen=True)
class Settings:
    """Process-wide configuration. Every field has a production default."""

    home: Path = field(default_factory=lambda: Path(".yuxi"))
    database_url: str | None = None
    # API only: where its request pool connects instead (PgBouncer in transaction mode);
    # LISTEN, the checkpointer and every other process keep database_url
    api_database_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    pool_min_size: int = 1
    pool_max_size: int = 10
    # API: how long a request waits for a pooled connection (while the database is
    # down, how long until it answers 503)
    pool_timeout_seconds: float = 5.0
    # worker: runs executed at once, lease length and renewal, shutdown grace
    worker_concurrency: int = 8
    lease_seconds: float = 60.0
    # attempts of a run given back for causes outside its agent (a lost lease, a lost
    # database connection, a worker shutting down) before the run fails
    infra_retries: int = 3
    lease_renew_seconds: float = 10.0
    shutdown_grace_seconds: float = 30.0
    # how often the lease reconciler and the recovery scan run (1-59 s)
    maintenance_seconds: int = 5
    # API: SSE heartbeat interval, largest request body accepted
    sse_heartbeat_seconds: float = 15.0
    max_body_bytes: int = 1024 * 1024
    # API: attachments, the largest file and the most bytes one conversation may hold
    attachment_max_bytes: int = 100 * 1024 * 1024
    thread_attachments_max_bytes: int = 1024 * 1024 * 1024
    # API: knowledge-base uploads, the largest document and the largest request
    kb_document_max_bytes: int = 100 * 1024 * 1024
    kb_upload_max_bytes: int = 512 * 1024 * 1024
    # API: where the LangGraph Platform-compatible routes are mounted (docs/langgraph.md)
    lg_prefix: str = "/lg"
    # API: the browser origins that may call /api and /lg from another site (CORS); "*"
    # for any, empty for none (yuxi/api/cors.py)
    cors_origins: tuple[str, ...] = ()
    # a LangGraph project (its langgraph.json, or the directory holding it) whose graphs
    # are served as agent backends (docs/langgraph.md#bring-a-langgraphjson-project)
    graphs: Path | None = None

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
            api_database_url=os.environ.get("YUXI_API_DATABASE_URL") or None,
            host=os.environ.get("YUXI_HOST") or "127.0.0.1",
            port=_env_int("YUXI_PORT", 8000),
            pool_min_size=_env_int("YUXI_POOL_MIN_SIZE", 1),
            pool_max_size=_env_int("YUXI_POOL_MAX_SIZE", 10),
            pool_timeout_seconds=_env_float("YUXI_POOL_TIMEOUT_SECONDS", 5.0),
            worker_concurrency=_env_int("YUXI_WORKER_CONCURRENCY", 8),
            lease_seconds=_env_float("YUXI_LEASE_SECONDS", 60.0),
            infra_retries=_env_int("YUXI_INFRA_RETRIES", 3),
            lease_renew_seconds=_env_float("YUXI_LEASE_RENEW_SECONDS", 10.0),
            shutdown_grace_seconds=_env_float("YUXI_SHUTDOWN_GRACE_SECONDS", 30.0),
            maintenance_seconds=_env_int("YUXI_MAINTENANCE_SECONDS", 5),
            sse_heartbeat_seconds=_env_float("YUXI_SSE_HEARTBEAT_SECONDS", 15.0),
            max_body_bytes=_env_int("YUXI_MAX_BODY_BYTES", 1024 * 1024),
            attachment_max_bytes=_env_int("YUXI_ATTACHMENT_MAX_BYTES", 100 * 1024 * 1024),
            thread_attachments_max_bytes=_env_int(
                "YUXI_THREAD_ATTACHMENTS_MAX_BYTES", 1024 * 1024 * 1024
            ),
            kb_document_max_bytes=_env_int("YUXI_KB_DOCUMENT_MAX_BYTES", 100 * 1024 * 1024),
            kb_upload_max_bytes=_env_int("YUXI_KB_UPLOAD_MAX_BYTES", 512 * 1024 * 1024),
            lg_prefix=os.environ.get("YUXI_LG_PREFIX") or "/lg",
            cors_origins=_env_origins("YUXI_CORS_ORIGINS"),
            graphs=Path(os.environ["YUXI_GRAPHS"]) if os.environ.get("YUXI_GRAPHS") else None,
        ).validated()

    def validated(self) -> Settings:
        """Refuses combinations that cannot work, naming the variable to fix."""
        if not 1 <= self.worker_concurrency <= 1000:
            raise SettingsError("YUXI_WORKER_CONCURRENCY must be between 1 and 1000")
        if not 0 <= self.infra_retries <= 100:
            raise SettingsError(f"YUXI_INFRA_RETRIES must be 0-100 (got {self.infra_retries})")
        if self.lease_seconds <= 0 or self.lease_renew_seconds <= 0:
            raise SettingsError("YUXI_LEASE_SECONDS and YUXI_LEASE_RENEW_SECONDS must be positive")
        if self.lease_renew_seconds >= self.lease_seconds:
            raise SettingsError(
                "YUXI_LEASE_RENEW_SECONDS must be shorter than YUXI_LEASE_SECONDS"
                f" ({self.lease_renew_seconds} >= {self.lease_seconds})"
            )
        if not 1 <= self.port <= 65535:
            raise SettingsError(f"YUXI_PORT must be a port number, got {self.port}")
        if self.sse_heartbeat_seconds <= 0 or self.max_body_bytes < 1024:
            raise SettingsError(
                "YUXI_SSE_HEARTBEAT_SECONDS must be positive and YUXI_MAX_BODY_BYTES at least 1024"
            )
        if not 1 <= self.maintenance_seconds <= 59:
            raise SettingsError("YUXI_MAINTENANCE_SECONDS must be between 1 and 59")
        if self.attachment_max_bytes < 1 or self.thread_attachments_max_bytes < 1:
            raise SettingsError(
                "YUXI_ATTACHMENT_MAX_BYTES and YUXI_THREAD_ATTACHMENTS_MAX_BYTES must be positive"
            )
        if self.kb_document_max_bytes < 1 or self.kb_upload_max_bytes < 1:
            raise SettingsError(
                "YUXI_KB_DOCUMENT_MAX_BYTES and YUXI_KB_UPLOAD_MAX_BYTES must be positive"
            )
        if not (
            self.lg_prefix.startswith("/")
            and self.lg_prefix != "/"
            and self.lg_prefix.rstrip("/") == self.lg_prefix
        ):
            raise SettingsError("YUXI_LG_PREFIX must be a path like /lg (no trailing slash)")
        if self.pool_timeout_seconds <= 0:
            raise SettingsError("YUXI_POOL_TIMEOUT_SECONDS must be positive")
        if self.pool_min_size < 0 or self.pool_max_size < max(self.pool_min_size, 1):
            raise SettingsError("YUXI_POOL_MAX_SIZE must be at least YUXI_POOL_MIN_SIZE and 1")
        _check_origins(self.cors_origins)
        return self


def _check_origins(origins: tuple[str, ...]) -> None:
    if "*" in origins and len(origins) > 1:
        raise SettingsError("YUXI_CORS_ORIGINS is either * alone or a list of origins")
    for origin in origins:
        if origin != "*" and not _ORIGIN.fullmatch(origin):
            raise SettingsError(
                f"YUXI_CORS_ORIGINS: {origin!r} is not an origin; write scheme://host[:port]"
                " in lower case, without a path or a trailing slash (https://chat.example.com)"
            )
