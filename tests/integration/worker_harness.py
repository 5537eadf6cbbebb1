"""A real worker (procrastinate + the run executor) running inside the test's loop."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from uuid import UUID

from tests.integration.conftest import World
from yuxi.queue.runs import run_get
from yuxi.runtime.resources import ResourceCatalog
from yuxi.settings import Settings
from yuxi.worker.app import run_worker

FINAL = {"completed", "failed", "cancelled", "interrupted"}


def worker_settings(home: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "home": home,
        "worker_concurrency": 4,
        "lease_seconds": 5.0,
        "lease_renew_seconds": 0.5,
        "shutdown_grace_seconds": 1.0,
        "maintenance_seconds": 1,
    }
    values.update(overrides)
    return Settings(**values).validated()


@contextlib.asynccontextmanager
async def running_worker(
    url: str, home: Path, catalog: ResourceCatalog | None = None, **overrides: Any
) -> AsyncIterator[None]:
    task = asyncio.create_task(
        run_worker(
            url, worker_settings(home, **overrides), install_signal_handlers=False, catalog=catalog
        )
    )
    try:
        await asyncio.sleep(0.3)
        if task.done():
            task.result()  # surface a startup failure
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def wait_for_status(
    world: World, run_id: UUID | None, statuses: set[str] = FINAL, within: float = 20.0
) -> str:
    assert run_id is not None
    deadline = time.monotonic() + within
    while True:
        async with world.pool.connection() as conn:
            run = await run_get(conn, run_id)
        status = run.status
        if status in statuses:
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} still {status} after {within}s")
        await asyncio.sleep(0.05)


async def completed(world: World, run_id: UUID | None, within: float = 20.0) -> None:
    """Waits for the run to complete; an unexpected end says why."""
    status = await wait_for_status(world, run_id, within=within)
    if status != "completed":
        async with world.pool.connection() as conn:
            run = await run_get(conn, run_id)  # type: ignore[arg-type]
        raise AssertionError(f"run {run_id} ended {status}: {run.error_type}: {run.error_message}")


async def wait_until(check: Callable[[], Awaitable[bool]], within: float = 20.0) -> None:
    """Polls ``check`` until it is true; fails after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within}s")
        await asyncio.sleep(0.05)
