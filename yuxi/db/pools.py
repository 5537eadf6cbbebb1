"""The connection pools of yuxi's processes, built in one place so the API and the worker
configure them alike.

Every pool is returned closed (``open=False``): open it in the owner's lifespan with
``await pool.open()`` or ``async with pool:``, and close it there too.
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool


def app_pool(
    url: str, *, max_size: int, min_size: int = 1, timeout: float = 30.0
) -> AsyncConnectionPool[Any]:
    """The pool for yuxi's own SQL calls (queue functions, reads): autocommit, because
    each call is one statement or one SQL function that manages its own transaction.
    ``timeout``: how long a caller waits for a connection (while the database is down,
    that is how long until it gets an error)."""
    return AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        open=False,
        timeout=timeout,
        kwargs={"autocommit": True},
        check=drop_if_closed_by_server,
    )


def checkpointer_pool(url: str, *, max_size: int, min_size: int = 1) -> AsyncConnectionPool[Any]:
    """The pool for LangGraph's ``AsyncPostgresSaver``, configured as it requires:
    autocommit, no server-side prepared statements, dict rows."""
    return AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        open=False,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        check=drop_if_closed_by_server,
    )


def procrastinate_pool(url: str, *, max_size: int = 4) -> AsyncConnectionPool[Any]:
    """The pool for procrastinate's own calls: autocommit, with no liveness query per
    checkout (its calls are single statements, so this halves their round trips)."""
    # autocommit is set in configure, not kwargs: procrastinate's listener connects with
    # the pool's kwargs plus its own autocommit=True, and a keyword cannot be given twice
    return AsyncConnectionPool(
        url, min_size=1, max_size=max_size, open=False, configure=_autocommit
    )


async def drop_if_closed_by_server(conn: AsyncConnection[Any]) -> None:
    """The pools' check on checkout, with no round trip for a healthy connection: one at
    rest has nothing to read, so anything readable means the server is closing it
    (``pg_terminate_backend``, a restart, an idle timeout) and a real round trip decides.
    A connection that fails is replaced by the pool before the caller sees it."""
    if conn.closed:
        raise psycopg.OperationalError("the connection is closed")
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        await AsyncConnectionPool.check_connection(conn)


async def _autocommit(conn: AsyncConnection[Any]) -> None:
    await conn.set_autocommit(True)
