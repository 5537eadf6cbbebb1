"""The worker's side of the memory tools: one run's ``RunMemory``.

The executor lends it to the run (``yuxi.agents.services``) around the graph it
streams. It holds the run's identity (run id, user, lease token) and the pool, so each
tool call asks the database whether the lease still holds (``yuxi.run_check_lease``).
The file is the user's ``agents/MEMORY.md`` in the store, read there (the latest,
whichever host wrote it) and edited there as a compare-and-swap: the edit replaces only
the version it read (``replaces``), so edits of two runs on two hosts apply one after
the other and none is lost. The worker's cached copy is updated with it. An edit made
by a tool call is recorded under the call's id in the same transaction
(``yuxi.run_tool_call_record``): a later attempt of the run that makes the same call
again finds it applied and gets the size it had, so an append is never made twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from psycopg_pool import AsyncConnectionPool

from yuxi.agents.memory import MemoryRefused
from yuxi.files.cache import TreeCache
from yuxi.files.workspace import MEMORY_FILE, PROMPT_LIMIT, without_comments
from yuxi.queue.errors import FileChanged, LeaseLost
from yuxi.queue.files import FileInfo, file_write
from yuxi.queue.runs import run_check_lease, run_tool_call_record, run_tool_call_result

# how often an edit is tried again when another writer changed the file meanwhile
_EDIT_ATTEMPTS = 8


@dataclass
class LeasedRunMemory:
    """``RunMemory`` of one leased run, for the user whose workspace (``workspace``, the
    worker's cache of that tree) holds the file."""

    pool: AsyncConnectionPool[Any]
    run: UUID
    user: UUID
    lease_token: UUID
    workspace: TreeCache
    # one edit at a time within the run (parallel tool calls); other runs: the store's
    # compare-and-swap
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
        store = self.workspace.store
        info = await store.get(self.workspace.tree, MEMORY_FILE)
        if info is None:
            raise MemoryRefused(f"{MEMORY_FILE} does not exist or is not a regular file")
        data = b"".join([p async for p in store.stream(info, 0, PROMPT_LIMIT)])
        text = without_comments(data.decode("utf-8", errors="ignore"))
        if info.bytes > PROMPT_LIMIT:
            text += f"\n\n[{MEMORY_FILE} was cut at 64 KiB; the rest is not shown]"
        return text

    async def edit(self, change: Callable[[str], str], key: str | None = None) -> int:
        async with self._editing:
            for _ in range(_EDIT_ATTEMPTS):
                if key is not None:
                    async with self.pool.connection() as conn:
                        done = await run_tool_call_result(conn, self.run, key)
                    if done is not None:  # an earlier attempt of the run applied it
                        return int(done)
                store, tree = self.workspace.store, self.workspace.tree
                info = await store.get(tree, MEMORY_FILE)
                if info is None:
                    raise MemoryRefused(f"{MEMORY_FILE} does not exist or is not a regular file")
                if info.bytes > PROMPT_LIMIT:
                    raise MemoryRefused(f"{MEMORY_FILE} is over {PROMPT_LIMIT} bytes (64 KiB)")
                data = b"".join([p async for p in store.stream(info)])
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    raise MemoryRefused(f"{MEMORY_FILE} is not valid UTF-8 text") from None
                new = change(text).encode("utf-8")
                if len(new) > PROMPT_LIMIT:
                    raise MemoryRefused(
                        f"{MEMORY_FILE} would be {len(new)} bytes;"
                        f" the limit is {PROMPT_LIMIT} bytes (64 KiB)"
                    )
                try:
                    saved = await self._write(tree, new, info.sha256, key)
                except FileChanged:
                    continue  # another run edited it meanwhile: edit the new text
                except _AppliedAlready:
                    continue  # recorded meanwhile: the next pass returns its size
                await self.workspace.stored(MEMORY_FILE, new, saved)
                return saved.bytes
        raise MemoryRefused(f"{MEMORY_FILE} kept changing while it was edited; try again")

    async def _write(self, tree: UUID, new: bytes, replaces: str, key: str | None) -> FileInfo:
        """The edit and, under ``key``, its record, in one transaction: both or neither."""
        async with self.pool.connection() as conn, conn.transaction():
            saved = await file_write(
                conn,
                tree,
                MEMORY_FILE,
                new,
                media_type="text/markdown",
                writer_uid=self.user,
                writer_run=self.run,
                replaces=replaces,
            )
            if key is not None and not await run_tool_call_record(
                conn, self.run, self.lease_token, key, "memory", str(saved.bytes)
            ):
                raise _AppliedAlready
            return saved


class _AppliedAlready(Exception):
    """The tool call was recorded by another writer first: the edit rolls back."""
