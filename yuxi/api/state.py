"""What the API process shares between requests: pools, the event hub, the checkpointer,
LangGraph's store, the resource catalog, the file store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from psycopg_pool import AsyncConnectionPool

from yuxi.api.event_hub import EventHub
from yuxi.files.store import FileStore
from yuxi.models.secret_box import SecretBox
from yuxi.resources import ResourceCatalog
from yuxi.runtime.import_thread import import_in_background
from yuxi.settings import Settings

if TYPE_CHECKING:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres.aio import AsyncPostgresStore


@dataclass
class AppState:
    settings: Settings
    pool: AsyncConnectionPool[Any]
    # the checkpointer's own pool (autocommit, no prepared statements, dict rows)
    saver_pool: AsyncConnectionPool[Any]
    hub: EventHub
    # what each user may select in an agent's resource fields (the agent detail's form)
    catalog: ResourceCatalog
    # seals the model keys users send (never opened in the API)
    secrets: SecretBox
    # every file: attachments, workdirs, workspaces, knowledge-base originals
    files: FileStore
    # LangGraph's store's own pool (as the checkpointer's, but its commits wait for the disk)
    items_pool: AsyncConnectionPool[Any] | None = None
    _checkpointer: AsyncPostgresSaver | None = field(default=None, init=False)
    _store: AsyncPostgresStore | None = field(default=None, init=False)

    async def checkpointer(self) -> AsyncPostgresSaver:
        """The checkpointer that agent state is read from, built on first use: LangGraph
        loads with the first state read, not with every API start, and in the process's
        import thread, so the requests served meanwhile do not wait the half second it
        takes."""
        if self._checkpointer is None:
            await import_in_background(*_CHECKPOINT_MODULES)
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

            self._checkpointer = AsyncPostgresSaver(self.saver_pool)
        return self._checkpointer

    async def store(self) -> AsyncPostgresStore:
        """LangGraph's store (the /lg store routes), built on first use like the
        checkpointer."""
        if self._store is None:
            await import_in_background("yuxi.runtime.store")
            from yuxi.runtime.store import postgres_store

            self._store = postgres_store(self.items_pool or self.saver_pool)
        return self._store


# the checkpointer and what its checkpoints hold besides messages (an interrupt)
_CHECKPOINT_MODULES = ("langgraph.checkpoint.postgres.aio", "langgraph.types")
