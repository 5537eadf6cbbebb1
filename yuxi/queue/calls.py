"""Calling a SQL function and reading its result into a Struct.

A call whose ``uid`` parameter is a ``Bearer`` (a request's token not checked yet) is
made as that token's user in one statement:

    SELECT caller.uid, caller.name, caller.is_admin, called.*
    FROM yuxi.token_authenticate(<token hash>) AS caller
    LEFT JOIN LATERAL (SELECT true, <fields> FROM <the call, uid => caller.uid>) AS called
      ON true

No row: no live user holds the token, and the call was not made (``Unauthenticated``).
A row with ``called`` empty: the call returned no row."""

from __future__ import annotations

import functools
from typing import Any, TypeVar

import msgspec
from psycopg import AsyncConnection, sql
from psycopg.rows import kwargs_row

from yuxi.queue.callers import Bearer, User
from yuxi.queue.errors import Unauthenticated, typed_errors

S = TypeVar("S", bound=msgspec.Struct)

_json = msgspec.json.Encoder()


def encode_json(value: Any) -> str:
    """JSON text for a ``%s::jsonb`` parameter."""
    return _json.encode(value).decode()


# The queries are rendered once, to bytes: psycopg renders a Composed again on every
# execute, and a query given as bytes it takes as it is.
@functools.cache
def _query(struct: type[msgspec.Struct], source: str) -> bytes:
    columns = sql.SQL(", ").join(sql.Identifier(name) for name in struct.__struct_fields__)
    return sql.SQL("SELECT {} FROM {}").format(columns, sql.SQL(source)).as_bytes(None)


@functools.cache
def _query_as_caller(struct: type[msgspec.Struct], source: str) -> bytes:
    columns = sql.SQL(", ").join(sql.Identifier(name) for name in struct.__struct_fields__)
    return (
        sql.SQL(
            "SELECT caller.uid, caller.name, caller.is_admin, called.*"
            " FROM yuxi.token_authenticate(%(caller_token_hash)s) AS caller"
            " LEFT JOIN LATERAL (SELECT true AS called, {} FROM {}) AS called ON true"
        )
        .format(columns, sql.SQL(source.replace("%(uid)s", "caller.uid")))
        .as_bytes(None)
    )


async def call_one(
    conn: AsyncConnection[Any], struct: type[S], source: str, params: dict[str, Any]
) -> S:
    """Runs ``SELECT <struct fields> FROM <source>`` and returns the single row."""
    caller = params.get("uid")
    if isinstance(caller, Bearer):
        rows = await _call_as(conn, caller, struct, source, params)
        if not rows:
            raise LookupError(f"{source} returned no row")
        return rows[0]
    async with conn.cursor(row_factory=kwargs_row(struct)) as cur:
        with typed_errors():
            await cur.execute(_query(struct, source), params)
            row = await cur.fetchone()
    if row is None:
        raise LookupError(f"{source} returned no row")
    return row


async def call_many(
    conn: AsyncConnection[Any],
    struct: type[S],
    source: str,
    params: dict[str, Any],
    *,
    binary: bool = False,
) -> list[S]:
    """Runs ``SELECT <struct fields> FROM <source>`` and returns every row. ``binary``:
    the rows come in PostgreSQL's binary format (a ``bytea`` as its bytes, not as hex
    text twice their size)."""
    caller = params.get("uid")
    if isinstance(caller, Bearer):
        return await _call_as(conn, caller, struct, source, params)
    async with conn.cursor(row_factory=kwargs_row(struct), binary=binary) as cur:
        with typed_errors():
            await cur.execute(_query(struct, source), params)
            return await cur.fetchall()


async def _call_as(
    conn: AsyncConnection[Any],
    caller: Bearer,
    struct: type[S],
    source: str,
    params: dict[str, Any],
) -> list[S]:
    """The call made as ``caller``'s user, authenticated in the same statement."""
    arguments = {key: value for key, value in params.items() if key != "uid"}
    arguments["caller_token_hash"] = caller.token_hash
    async with conn.cursor() as cur:
        with typed_errors():
            await cur.execute(_query_as_caller(struct, source), arguments)
            rows = await cur.fetchall()
    if not rows:
        raise Unauthenticated("invalid or revoked token")
    uid, name, is_admin = rows[0][:3]
    caller.checked(User(uid, name, is_admin))
    return [struct(*row[4:]) for row in rows if row[3]]


async def call_scalar(conn: AsyncConnection[Any], query: str, params: dict[str, Any]) -> Any:
    """Runs a one-value query (``SELECT yuxi.fn(...)``) and returns the value."""
    async with conn.cursor() as cur:
        with typed_errors():
            await cur.execute(query, params)
            row = await cur.fetchone()
    return None if row is None else row[0]
