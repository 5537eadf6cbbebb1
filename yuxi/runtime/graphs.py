"""Serving a LangGraph project's graphs (``YUXI_GRAPHS``, ``yuxi up --graphs``): each
graph a backend of this process and an agent of the same slug, visible to every user
like the built-in agents (``yuxi.agent_seed``: created when the slug is free, never
changed once there, so an admin may narrow who sees it)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from psycopg_pool import AsyncConnectionPool

from yuxi.agents.graphs import Project, preload, register_project
from yuxi.queue.agents import agent_list, agent_seed

log = logging.getLogger("yuxi.agents.graphs")


async def serve_graphs(pool: AsyncConnectionPool[Any], path: Path) -> Project:
    """Registers the project's graphs as backends (nothing imported) and seeds the
    agent of each whose slug is free; an agent of that slug with another backend is
    left as it is, and logged."""
    project = register_project(path)
    async with pool.connection() as conn:
        for key, spec in project.graphs.items():
            created = await agent_seed(
                conn, key, key, key, {"context": {}}, spec.description or f"the graph {key}"
            )
            if created:
                log.info("created the agent %s for the graph %s", key, spec.target)
        taken = {a.slug: a.backend_id for a in await agent_list(conn) if a.deleted_at is None}
    for key in project.graphs:
        if taken.get(key, key) != key:
            log.warning(
                "the agent %s uses the backend %s, not the graph %s of the project",
                key,
                taken[key],
                key,
            )
    return project


async def preload_graphs(path: Path) -> None:
    """A worker's start: imports every graph in a thread, so an import error is in the
    log at once (the graph's runs fail with it; the others run)."""
    project = register_project(path)
    failed = await asyncio.to_thread(preload, project)
    loaded = [key for key in project.graphs if key not in failed]
    log.info("graphs loaded: %s", ", ".join(loaded) or "none")
