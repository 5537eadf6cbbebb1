"""The database going away: which errors mean it, and how long to wait before trying again.

A restart, a failover, ``pg_terminate_backend`` or a network cut show up as a handful
of errors (a connection that fails or breaks, a server shutting down, a pool with no
connection to give); every loop that reconnects uses ``is_connection_error`` to tell
them from the errors of a statement, and ``Backoff`` to space its attempts;
``until_reachable`` is that loop for one call.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import psycopg
import psycopg_pool

# admin_shutdown, crash_shutdown, cannot_connect_now: the server is going down or is
# not up yet; class 08 is connection exceptions
_SHUTDOWN_STATES = frozenset({"57P01", "57P02", "57P03"})

T = TypeVar("T")


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


async def until_reachable(
    attempt: Callable[[], Awaitable[T]],
    *,
    log: logging.Logger,
    what: str,
    backoff: Backoff | None = None,
) -> T:
    """``await attempt()`` until it returns or raises anything but a lost connection,
    waiting with ``backoff`` between tries. The first outage is logged once, as "cannot
    reach the database to ``what``", and a success after one is logged too. Pass your
    own ``backoff`` to learn afterwards whether any try failed (``backoff.failures``):
    a write whose reply was lost may have been made."""
    backoff = backoff or Backoff()
    while True:
        try:
            result = await attempt()
        except Exception as error:
            if not is_connection_error(error):
                raise
            if backoff.failures == 0:
                log.warning("cannot reach the database to %s (%s); retrying", what, describe(error))
            await asyncio.sleep(backoff.next())
            continue
        if backoff.failures:
            log.info("reached the database again to %s", what)
        return result
