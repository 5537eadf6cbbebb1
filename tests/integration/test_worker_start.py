"""A `yuxi worker` registers before its agent stack has loaded, says when it has, and
exits when the stack cannot be imported (a broken install), rather than taking runs it
cannot execute."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import psycopg

from tests.integration.hosts import Hosts


async def _registered(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute("SELECT count(*) FROM procrastinate_workers")
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def _wait_for(condition: Callable[[], Awaitable[bool]], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not await condition():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)


async def test_a_worker_registers_then_loads_its_stack(db_url: str, tmp_path: Path) -> None:
    hosts = Hosts(db_url, tmp_path)
    await hosts.start("worker", "worker")
    try:

        async def registered() -> bool:
            return await _registered(db_url) > 0

        async def loaded() -> bool:
            return "worker: ready to execute runs" in hosts.log("worker")

        await _wait_for(registered)
        await _wait_for(loaded)
    finally:
        assert await hosts.stop("worker") == 0, hosts.log("worker")


async def test_a_worker_whose_stack_cannot_be_imported_exits(db_url: str, tmp_path: Path) -> None:
    # a package of the stack that fails to import, ahead of the real one on sys.path
    broken = tmp_path / "broken" / "langchain_text_splitters"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('a broken install')\n")
    hosts = Hosts(db_url, tmp_path)
    worker = await hosts.start("worker", "worker", PYTHONPATH=str(broken.parent))
    try:
        status = await asyncio.wait_for(worker.wait(), 60)
    finally:
        await hosts.stop_all()
    assert status != 0
    assert "a broken install" in hosts.log("worker")
