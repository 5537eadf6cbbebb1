"""The database going away: which errors mean it, and how long to wait before trying again.

A restart, a failover, ``pg_terminate_backend`` or a network cut show up as a handful
of errors (a connection that fails or breaks, a server shutting down, a pool with no
connection to give); every loop that reconnects uses ``is_connection_error`` to tell
them from the errors of a statement, and ``Backoff`` to space its attempts.
"""

from __future__ import annotations

import random

import psycopg
import psycopg_pool

# admin_shutdown, crash_shutdown, cannot_connect_now: the server is going down or is
# not up yet; class 08 is connection exceptions
_SHUTDOWN_STATES = frozenset({"57P01", "57P02", "57P03"})


def is_connection_error(error: BaseException) -> bool:
    """Whether ``error`` (or what it wraps: procrastinate's ConnectorException, a
    LangGraph error raised from a checkpointer's) says the connection to PostgreSQL was
    lost or could not be made, rather than that a statement failed. A statement
    cancelled by a timeout or a lock that is not available are statement errors."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _is_connection_error(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def _is_connection_error(error: BaseException) -> bool:
    if isinstance(error, psycopg_pool.PoolTimeout | psycopg.InterfaceError):
        return True
    if isinstance(error, psycopg.OperationalError):
        state = error.sqlstate
        # no SQLSTATE: the client found the connection unusable (refused, reset, closed)
        return state is None or state.startswith("08") or state in _SHUTDOWN_STATES
    return False


def describe(error: BaseException) -> str:
    """One line for a log: ``Type: first line of the message`` of what ``error`` wraps
    (procrastinate's ConnectorException says only "Database error")."""
    cause = error.__cause__ or error
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0] if lines else ''}"


class Backoff:
    """Exponential back-off with jitter: ``first`` seconds, doubling, at most ``cap``;
    each delay is drawn from its upper half, so processes cut off together do not all
    come back in the same instant."""

    def __init__(self, first: float = 0.25, cap: float = 5.0) -> None:
        self.first = first
        self.cap = cap
        self.failures = 0

    def next(self) -> float:
        """The delay before the next attempt (and counts a failure)."""
        delay: float = min(self.cap, self.first * 2.0**self.failures)
        self.failures += 1
        return delay * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        """After a success: the next failure waits ``first`` again."""
        self.failures = 0
