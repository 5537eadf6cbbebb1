"""An agent package installed next to yuxi runs end to end: found through its
``yuxi.agents`` entry point by an in-process worker and by a ``yuxi worker`` process,
configured from the agent's ``config.context``, streamed and finished like a built-in.
A package whose entry point is broken fails only the runs of its own backend."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.agent_package import install_agent_package, on_sys_path, write_entry_point
from tests.integration.conftest import World
from tests.integration.worker_harness import completed, running_worker, wait_for_status
from yuxi.agents.config import check_agent_config
from yuxi.agents.registry import get_backend
from yuxi.agents.tools import builtin_tool_names

CONFIG = {"context": {"model": "builtin:scripted", "greeting": "Bonjour", "style": "loud"}}


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return install_agent_package(tmp_path / "site")


async def _agent(world: World, slug: str, backend_id: str, config: dict[str, Any]) -> None:
    await world.execute(
        "INSERT INTO yuxi.agents (slug, name, backend_id, config_json) VALUES (%s, %s, %s, %s)",
        slug,
        slug.title(),
        backend_id,
        json.dumps(config),
    )


async def _reply(world: World, run_id: object) -> str:
    return str(
        await world.value(
            "SELECT m.content FROM yuxi.agent_runs r"
            " JOIN yuxi.messages m ON m.id = r.output_message_id WHERE r.run_id = %s",
            run_id,
        )
    )


async def test_an_installed_agent_runs_through_a_worker(
    world: World, db_url: str, tmp_path: Path, site: Path
) -> None:
    with on_sys_path(site):
        backend = get_backend("example")
        check_agent_config(backend, CONFIG)
        await _agent(world, "greeter", "example", CONFIG)
        thread = await world.thread(agent="greeter")
        async with running_worker(db_url, tmp_path / "home"):
            greeted = await world.submit(thread, '/tool greet {"name": "Ada"}')
            await completed(world, greeted.run_id)
            echoed = await world.submit(thread, "hello")
            await completed(world, echoed.run_id)

        info = backend.get_info(options={"tools": builtin_tool_names(), "agents": ["helper"]})
    # the tool read greeting and style from the run's Context, loaded from config.context
    assert await _reply(world, greeted.run_id) == "tool greet returned: BONJOUR, ADA"
    assert await _reply(world, echoed.run_id) == "echo: hello"
    manifest = await world.value(
        "SELECT manifest FROM yuxi.agent_runs WHERE run_id = %s", greeted.run_id
    )
    assert manifest["agent"] == {"slug": "greeter", "backend_id": "example"}
    events = [
        row[0]
        for row in await world.fetch(
            "SELECT event FROM yuxi.run_events WHERE run_id = %s ORDER BY seq", greeted.run_id
        )
    ]
    assert events[0] == "metadata" and events[-1] == "end"

    items = {item["key"]: item for item in info["configurable_items"]}
    assert (items["greeting"]["default"], items["greeting"]["kind"]) == ("Hello", "text")
    assert items["style"]["options"] == ["plain", "loud"]
    assert items["tools"]["options"] == builtin_tool_names()
    assert {"model", "system_prompt", "knowledges", "mcps", "skills"} <= set(items)
    assert not {"uid", "thread_id", "tool_approval_mode", "subagents"} & set(items)


async def test_the_agent_asks_before_its_tool_when_the_run_says_so(
    world: World, db_url: str, tmp_path: Path, site: Path
) -> None:
    with on_sys_path(site):
        await _agent(world, "careful", "example", CONFIG)
        thread = await world.thread(agent="careful")
        async with running_worker(db_url, tmp_path / "home"):
            info = await world.submit(
                thread, '/tool greet {"name": "Ada"}', tool_approval_mode="ask"
            )
            assert await wait_for_status(world, info.run_id) == "interrupted"


@pytest.fixture
async def worker_process(db_url: str, tmp_path: Path, site: Path) -> AsyncIterator[None]:
    """``yuxi worker`` in its own process, with the package's directory on PYTHONPATH
    (as if it were installed in the same environment as yuxi)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
        "YUXI_DATABASE_URL": db_url,
        "YUXI_HOME": str(tmp_path / "process-home"),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "yuxi.cli",
        "worker",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 15)
            except TimeoutError:
                process.kill()
                await process.wait()


async def test_a_yuxi_worker_process_finds_the_package(world: World, worker_process: None) -> None:
    await _agent(world, "greeter", "example", CONFIG)
    thread = await world.thread(agent="greeter")
    info = await world.submit(thread, '/tool greet {"name": "Grace"}')
    await completed(world, info.run_id, within=60)
    assert await _reply(world, info.run_id) == "tool greet returned: BONJOUR, GRACE"


async def test_a_broken_package_fails_only_its_own_runs(
    world: World, db_url: str, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    write_entry_point(site, "broken_agent", "broken", "yuxi_no_such_module:Agent")
    await _agent(world, "broken", "broken", {"context": {}})
    broken_thread = await world.thread(agent="broken")
    chat_thread = await world.thread()
    with on_sys_path(site):
        async with running_worker(db_url, tmp_path / "home"):
            broken = await world.submit(broken_thread, "hello")
            assert await wait_for_status(world, broken.run_id) == "failed"
            fine = await world.submit(chat_thread, "still here")
            await completed(world, fine.run_id)
    error_type, message = (
        await world.fetch(
            "SELECT error_type, error_message FROM yuxi.agent_runs WHERE run_id = %s",
            broken.run_id,
        )
    )[0]
    assert error_type == "agent_backend"
    assert "agent backend 'broken' failed to load: ModuleNotFoundError" in message
    assert await _reply(world, fine.run_id) == "echo: still here"
