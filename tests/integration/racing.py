"""Racing real connections against each other."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from psycopg import AsyncConnection

T = TypeVar("T")


MAX_CONNECTIONS = 50  # stays clear of a default server's max_connections = 100


async def race(
    url: str, count: int, action: Callable[[AsyncConnection[Any], int], Awaitable[T]]
) -> list[T | BaseException]:
    """Starts ``action(conn, i)`` for i in range(count) at once, over up to 50 real
    connections (each call its own autocommit transaction); returns results or
    exceptions in order. Beyond 50, calls share connections round-robin."""
    conns = [
        await AsyncConnection.connect(url, autocommit=True)
        for _ in range(min(count, MAX_CONNECTIONS))
    ]
    start = asyncio.Event()

    async def run(i: int) -> T:
        await start.wait()
        return await action(conns[i % len(conns)], i)

    try:
        tasks = [asyncio.create_task(run(i)) for i in range(count)]
        await asyncio.sleep(0)
        start.set()
        return list(await asyncio.gather(*tasks, return_exceptions=True))
    finally:
        for conn in conns:
            await conn.close()


def failures(results: list[Any]) -> list[BaseException]:
    return [r for r in results if isinstance(r, BaseException)]


def successes(results: list[Any]) -> list[Any]:
    return [r for r in results if not isinstance(r, BaseException)]
