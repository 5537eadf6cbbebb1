"""The connection pools of yuxi's processes, built in one place so the API and the worker
configure them alike.

Every pool is returned closed (``open=False``): open it in the owner's lifespan with
``await pool.open()`` or ``async with pool:``, and close it there too.

Through a database outage (a restart, ``pg_terminate_backend``, a network cut) every
pool behaves the same way:

- a connection the server closed is found on checkout at no cost
  (``drop_if_closed_by_server``), and then every idle connection of the pool is
  checked at once, since they were most likely closed together;
- a statement of a process that died (SIGKILL, a lost machine) is cancelled by the
  server within ``CLIENT_CHECK_MS`` instead of running on and committing for nobody
  (``client_connection_check_interval``): a claim blocked on a lock when its worker was
  killed must not take the run once the lock is released;
- a connection that cannot be made is tried again for ``RECONNECT_SECONDS`` only
  (psycopg's pool doubles its wait between attempts, from 1 s, for 5 minutes by
  default, so a pool could stay empty for half a minute after the database is back);
  after that the next caller that needs a connection, or ``pool.check()``, starts a new
  round of attempts at once.
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

RECONNECT_SECONDS = 2.0
CLIENT_CHECK_MS = 1000


def app_pool(
    url: str,
    *,
    max_size: int,
    min_size: int = 1,
    timeout: float = 30.0,
    prepared_statements: bool = True,
) -> AsyncConnectionPool[Any]:
    """The pool for yuxi's own SQL calls (queue functions, reads): autocommit, because
    each call is one statement or one SQL function that manages its own transaction.
    ``timeout``: how long a caller waits for a connection (while the database is down,
    that is how long until it gets an error). ``prepared_statements=False`` for a pool
    behind a transaction pooler (PgBouncer), where a server session is not this
    connection's from one transaction to the next."""
    kwargs: dict[str, Any] = {"autocommit": True}
    if not prepared_statements:
        kwargs["prepare_threshold"] = None
    return _pool(url, min_size=min_size, max_size=max_size, timeout=timeout, kwargs=kwargs)


def checkpointer_pool(url: str, *, max_size: int, min_size: int = 1) -> AsyncConnectionPool[Any]:
    """The pool for LangGraph's ``AsyncPostgresSaver``, configured as it requires:
    autocommit, no server-side prepared statements, dict rows.

    Its commits do not wait for the WAL flush (``synchronous_commit = off``): a run's
    checkpoints become durable with the run's next synchronous commit, its end
    (``run_finish``, ``run_retry``) or its next event batch, whose flush covers every
    WAL record before it. A crash of the database before that loses at most the last
    checkpoints of a run that had not ended, which is then retried or failed as every
    run cut by a crash is (docs/queue.md, "Commits that do not wait for the disk"). A
    run makes a checkpoint per step, so this takes several flush waits off every run."""
    return _pool(
        url,
        min_size=min_size,
        max_size=max_size,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        synchronous_commit=False,
    )


def store_pool(url: str, *, max_size: int, min_size: int = 1) -> AsyncConnectionPool[Any]:
    """The pool for LangGraph's ``AsyncPostgresStore`` (the ``/lg`` store, the graphs'
    ``get_store()``), configured as it requires: autocommit, no server-side prepared
    statements, dict rows. Unlike the checkpointer's, its commits wait for the disk: an
    item a client was told is stored stays stored."""
    return _pool(
        url,
        min_size=min_size,
        max_size=max_size,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    )


def procrastinate_pool(url: str, *, max_size: int = 4) -> AsyncConnectionPool[Any]:
    """The pool for procrastinate's own calls: autocommit, with no liveness query per
    checkout (its calls are single statements, so that would double their round trips),
    only the free check of ``drop_if_closed_by_server``: a connection the server ended
    is replaced instead of failing procrastinate's next fetch or heartbeat, which would
    end its worker. A caller waits at most 5 s for a connection, the pool trying to
    connect all that time: a worker that lost its database gives this pool up soon and
    starts again with a new one (yuxi/worker/app.py).

    Its commits do not wait for the WAL flush either (``synchronous_commit = off``):
    they only mark delivery jobs fetched or delete the finished ones, and a job whose
    mark a crash loses is delivered again and finds its run claimed (or left over and
    deleted by ``yuxi.delivery_prune``): the run's claim decides, never the job."""
    # autocommit is set in configure, not kwargs: procrastinate's listener connects with
    # the pool's kwargs plus its own autocommit=True, and a keyword cannot be given twice
    return _pool(
        url,
        min_size=1,
        max_size=max_size,
        timeout=5.0,
        reconnect_timeout=5.0,
        autocommit_first=True,
        synchronous_commit=False,
    )


def _pool(
    url: str, *, autocommit_first: bool = False, synchronous_commit: bool = True, **options: Any
) -> AsyncConnectionPool[Any]:
    pool: AsyncConnectionPool[Any] | None = None
    # one statement, one round trip (an extended-protocol query holds one command)
    setup = f"SELECT set_config('client_connection_check_interval', '{CLIENT_CHECK_MS}', false)"
    if not synchronous_commit:
        setup += ", set_config('synchronous_commit', 'off', false)"

    async def configure(conn: AsyncConnection[Any]) -> None:
        if autocommit_first:
            await conn.set_autocommit(True)
        await conn.execute(setup)

    async def check(conn: AsyncConnection[Any]) -> None:
        try:
            await drop_if_closed_by_server(conn)
        except Exception:
            # the others were most likely closed with it: check them all now, rather
            # than one per checkout with psycopg's back-off between them
            if pool is not None:
                await pool.check()
            raise

    options.setdefault("reconnect_timeout", RECONNECT_SECONDS)
    pool = AsyncConnectionPool(url, open=False, check=check, configure=configure, **options)
    return pool


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
