"""What the API process shares between requests: pools, the event hub, the checkpointer,
the resource catalog."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg_pool import AsyncConnectionPool

from yuxi.api.event_hub import EventHub
from yuxi.runtime.resources import ResourceCatalog
from yuxi.settings import Settings


@dataclass
class AppState:
    settings: Settings
    pool: AsyncConnectionPool[Any]
    checkpointer: AsyncPostgresSaver
    hub: EventHub
    # what each user may select in an agent's resource fields (the agent detail's form)
    catalog: ResourceCatalog
