"""The worker's side of the memory tools: one run's ``RunMemory``.

The executor sets it in ``yuxi.agents.memory.current_run_memory`` around the graph it
streams. It holds the run's identity (run id, user, lease token) and the pool, so each
tool call asks the database whether the lease still holds (``yuxi.run_check_lease``);
it reads and edits the user's ``agents/MEMORY.md`` in a worker thread, atomically and
without following symlinks (``yuxi.files.workspace``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from psycopg_pool import AsyncConnectionPool

from yuxi.agents.memory import MemoryRefused
from yuxi.files.workspace import (
    MEMORY_FILE,
    PROMPT_LIMIT,
    WorkspaceFileRefused,
    edit_workspace_file,
    read_workspace_bytes,
    without_comments,
)
from yuxi.queue.errors import LeaseLost
from yuxi.queue.runs import run_check_lease


@dataclass
class LeasedRunMemory:
    """``RunMemory`` of one leased run, for the user whose ``workspace`` holds the file."""

    pool: AsyncConnectionPool[Any]
    run: UUID
    user: UUID
    lease_token: UUID
    workspace: Path
    # one edit at a time within the run (parallel tool calls); other processes: the lock
    # edit_workspace_file takes
    _editing: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    @property
    def run_id(self) -> str:
        return str(self.run)

    @property
    def uid(self) -> str:
        return str(self.user)

    async def check_lease(self) -> None:
        try:
            async with self.pool.connection() as conn:
                await run_check_lease(conn, self.run, self.lease_token, uid=self.user)
        except LeaseLost:
            raise MemoryRefused(
                "this run no longer holds its lease; memory is left unchanged"
            ) from None

    async def read(self) -> str:
        """What the agent may see of the file: at most 64 KiB (cut with a notice), without
        its HTML comments (the user's notes, as in every prompt file)."""
        data = await asyncio.to_thread(
            read_workspace_bytes, self.workspace, MEMORY_FILE, PROMPT_LIMIT + 1
        )
        if data is None:
            raise MemoryRefused(f"{MEMORY_FILE} does not exist or is not a regular file")
        text = without_comments(data[:PROMPT_LIMIT].decode("utf-8", errors="ignore"))
        if len(data) > PROMPT_LIMIT:
            text += f"\n\n[{MEMORY_FILE} was cut at 64 KiB; the rest is not shown]"
        return text

    async def edit(self, change: Callable[[str], str]) -> int:
        async with self._editing:
            try:
                saved = await asyncio.to_thread(
                    edit_workspace_file, self.workspace, MEMORY_FILE, change
                )
            except WorkspaceFileRefused as refused:
                raise MemoryRefused(str(refused)) from None
            except OSError as error:  # its text names host paths: only the reason leaves
                raise MemoryRefused(
                    f"{MEMORY_FILE} cannot be written: {error.strerror or type(error).__name__}"
                ) from None
        return saved.bytes
