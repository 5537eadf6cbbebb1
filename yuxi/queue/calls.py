"""Calling a SQL function and reading its result into a Struct."""

from __future__ import annotations

import functools
from typing import Any, TypeVar

import msgspec
from psycopg import AsyncConnection, sql
from psycopg.rows import kwargs_row

from yuxi.queue.errors import typed_errors

S = TypeVar("S", bound=msgspec.Struct)

_json = msgspec.json.Encoder()


def encode_json(value: Any) -> str:
    """JSON text for a ``%s::jsonb`` parameter."""
    return _json.encode(value).decode()


@functools.cache
def _query(struct: type[msgspec.Struct], source: str) -> sql.Composed:
    columns = sql.SQL(", ").join(sql.Identifier(name) for name in struct.__struct_fields__)
    return sql.SQL("SELECT {} FROM {}").format(columns, sql.SQL(source))


async def call_one(
    conn: AsyncConnection[Any], struct: type[S], source: str, params: dict[str, Any]
) -> S:
    """Runs ``SELECT <struct fields> FROM <source>`` and returns the single row."""
    async with conn.cursor(row_factory=kwargs_row(struct)) as cur:
        with typed_errors():
            await cur.execute(_query(struct, source), params)
            row = await cur.fetchone()
    if row is None:
        raise LookupError(f"{source} returned no row")
    return row


async def call_many(
    conn: AsyncConnection[Any], struct: type[S], source: str, params: dict[str, Any]
) -> list[S]:
    """Runs ``SELECT <struct fields> FROM <source>`` and returns every row."""
    async with conn.cursor(row_factory=kwargs_row(struct)) as cur:
        with typed_errors():
            await cur.execute(_query(struct, source), params)
            return await cur.fetchall()


async def call_scalar(conn: AsyncConnection[Any], query: str, params: dict[str, Any]) -> Any:
    """Runs a one-value query (``SELECT yuxi.fn(...)``) and returns the value."""
    async with conn.cursor() as cur:
        with typed_errors():
            await cur.execute(query, params)
            row = await cur.fetchone()
    return None if row is None else row[0]
