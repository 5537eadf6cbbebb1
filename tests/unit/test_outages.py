"""Which errors mean the database went away, and the back-off of reconnecting loops."""

from __future__ import annotations

import psycopg
import psycopg_pool
import pytest
from procrastinate.exceptions import ConnectorException
from psycopg import errors

from yuxi.db.outages import Backoff, describe, is_connection_error


def _wrapped(error: BaseException) -> ConnectorException:
    """As procrastinate raises it: ``raise ConnectorException from error``."""
    try:
        raise ConnectorException() from error
    except ConnectorException as wrapper:
        return wrapper


@pytest.mark.parametrize(
    "error",
    [
        psycopg.OperationalError("connection failed: server closed the connection"),
        errors.AdminShutdown("terminating connection due to administrator command"),
        errors.CannotConnectNow("the database system is starting up"),
        errors.ConnectionFailure("lost"),
        psycopg.InterfaceError("the connection is closed"),
        psycopg_pool.PoolTimeout("couldn't get a connection after 30.00 sec"),
        _wrapped(errors.AdminShutdown("terminating connection")),
    ],
)
def test_a_lost_connection_is_one(error: BaseException) -> None:
    assert is_connection_error(error)


@pytest.mark.parametrize(
    "error",
    [
        errors.QueryCanceled("canceling statement due to statement timeout"),
        errors.LockNotAvailable("could not obtain lock"),
        errors.UniqueViolation("duplicate key"),
        errors.RaiseException("run is not pending"),
        RuntimeError("a tool failed"),
        _wrapped(errors.UniqueViolation("duplicate key")),
    ],
)
def test_a_statement_error_is_not(error: BaseException) -> None:
    assert not is_connection_error(error)


def test_describe_is_one_line_of_what_is_wrapped() -> None:
    error = _wrapped(psycopg.OperationalError("connection failed\n\tIs the server running?"))
    assert describe(error) == "OperationalError: connection failed"


def test_backoff_doubles_to_its_cap_with_jitter_and_resets() -> None:
    backoff = Backoff(first=0.25, cap=2.0)
    delays = [backoff.next() for _ in range(8)]
    for delay, ceiling in zip(delays, [0.25, 0.5, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0], strict=True):
        assert ceiling / 2 <= delay <= ceiling
    assert backoff.failures == 8
    backoff.reset()
    assert backoff.failures == 0
    assert backoff.next() <= 0.25
