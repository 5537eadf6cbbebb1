"""What a worker executes runs with — LangGraph and its checkpointer, LangChain, the
model clients, the built-in agents' graph, the text splitter of knowledge ingestion —
loaded in the background from the worker's start (``import_in_background``), not
before it registers: about a second and a half of imports. The worker registers and
answers its maintenance jobs meanwhile; a run, an ingestion or an MCP discovery
delivered before the stack is loaded waits for the rest of it before it claims
anything (so LangChain is never imported on the event loop's thread while the import
thread imports it)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from yuxi.runtime.import_thread import import_in_background

if TYPE_CHECKING:
    from yuxi.runtime.executor import RunExecutor

log = logging.getLogger("yuxi.worker")

STACK_MODULES = (
    "yuxi.runtime.executor",
    "langgraph.checkpoint.postgres.aio",
    "yuxi.runtime.store",
    "yuxi.agents.graph",
    "langchain_text_splitters",
)


class RunStack:
    """The worker's run executor, built by ``build`` once the stack is loaded."""

    def __init__(self, build: Callable[[], RunExecutor]) -> None:
        self._build = build
        self._executor: RunExecutor | None = None
        self._started = time.monotonic()
        self._loading = asyncio.ensure_future(import_in_background(*STACK_MODULES))
        self._loading.add_done_callback(self._loaded)

    def _loaded(self, loading: asyncio.Future[None]) -> None:
        if not loading.cancelled() and loading.exception() is None:
            seconds = time.monotonic() - self._started
            log.info("worker: ready to execute runs (agent stack loaded in %.2fs)", seconds)

    async def loaded(self) -> None:
        """Returns once the stack is loaded (an import error is raised here)."""
        await asyncio.shield(self._loading)

    async def failed(self) -> None:
        """Raises the stack's import error; never returns when it loaded."""
        await self.loaded()
        await asyncio.Event().wait()

    async def executor(self) -> RunExecutor:
        await self.loaded()
        if self._executor is None:
            self._executor = self._build()
        return self._executor
