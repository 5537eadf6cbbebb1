"""The memory tools against the real database: yuxi.run_check_lease, every tool call
refused once its run's lease is gone (the file unchanged), and the file itself in the
store (edits as compare-and-swaps, so concurrent edits of two runs both land)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from tests.integration.conftest import World
from yuxi.agents.chatbot import ChatBotContext
from yuxi.agents.graph import build_agent_graph
from yuxi.agents.memory import MemoryRefused
from yuxi.agents.services import RunServices, run_services
from yuxi.files.cache import TreeCache
from yuxi.files.memory import LeasedRunMemory
from yuxi.files.store import PostgresFileStore
from yuxi.files.workspace import MEMORY_FILE, PROMPT_LIMIT
from yuxi.queue.runs import ClaimedRun, run_release


class Workspace:
    """The user's workspace tree in the store, and a worker's cache of it."""

    def __init__(self, world: World, home: Path, uid: UUID, tree: UUID) -> None:
        self.store = PostgresFileStore(world.pool)
        self.tree = tree
        self.cache = TreeCache(self.store, home, uid, tree, home / "workspaces" / str(uid))

    async def put(self, text: str) -> None:
        await self.store.write(self.tree, MEMORY_FILE, text.encode())

    async def text(self) -> str | None:
        data = await self.store.read(self.tree, MEMORY_FILE, limit=10 * PROMPT_LIMIT)
        return None if data is None else data.decode()


async def _workspace(world: World, home: Path, uid: UUID) -> Workspace:
    tree = await PostgresFileStore(world.pool).workspace_tree(uid)
    return Workspace(world, home, uid, tree)


async def _claimed(world: World) -> ClaimedRun:
    info = await world.submit(await world.thread(), "work")
    assert info.run_id is not None
    return await world.claim(info.run_id)


async def _check(world: World, run_id: UUID, token: UUID, uid: UUID, now: Any = None) -> None:
    await world.value("SELECT yuxi.run_check_lease(%s, %s, %s, %s)", run_id, token, uid, now)


async def test_run_check_lease_passes_only_for_the_holder_of_a_live_lease(world: World) -> None:
    claimed = await _claimed(world)
    run, token, alice = claimed.run_id, claimed.lease_token, claimed.uid
    await _check(world, run, token, alice)
    refusals: list[tuple[UUID, UUID, UUID, Any]] = [
        (run, uuid4(), alice, None),  # another token
        (run, token, world.bob, None),  # another user's run
        (uuid4(), token, alice, None),  # no such run
        (run, token, alice, claimed.lease_expires_at + timedelta(seconds=1)),  # expired
    ]
    for args in refusals:
        with pytest.raises(Exception) as caught:
            await _check(world, *args)
        assert getattr(caught.value, "sqlstate", None) == "YL001", args
    await world.complete(claimed)
    with pytest.raises(Exception) as ended:
        await _check(world, run, token, alice)
    assert getattr(ended.value, "sqlstate", None) == "YL001"


def _memory_context(claimed: ClaimedRun, workdir: Path) -> ChatBotContext:
    return ChatBotContext(
        model="builtin:scripted",
        tools=[],
        enable_memory=True,
        memory="- likes tea",
        uid=str(claimed.uid),
        run_id=str(claimed.run_id),
        workdir=str(workdir),
    )


async def _reply(context: ChatBotContext, query: str, thread: str) -> str:
    graph = build_agent_graph(context, checkpointer=InMemorySaver())
    state = await graph.ainvoke(
        {"messages": [{"role": "user", "content": query}]},
        {"configurable": {"thread_id": thread}},
        context=context,
    )
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    return last.text


async def test_a_memory_call_after_the_lease_is_lost_is_refused(
    world: World, tmp_path: Path
) -> None:
    claimed = await _claimed(world)
    workspace = await _workspace(world, tmp_path, claimed.uid)
    await workspace.put("- likes tea\n")
    context = _memory_context(claimed, tmp_path / "work")
    memory = LeasedRunMemory(
        world.pool, claimed.run_id, claimed.uid, claimed.lease_token, workspace.cache
    )
    with run_services(RunServices(memory=memory)):
        append = '/tool memory_append {"text": "- has a cat"}'
        assert await _reply(context, append, "t1") == (
            "tool memory_append returned: appended to agents/MEMORY.md (25 bytes now)"
        )
        assert await workspace.text() == "- likes tea\n\n- has a cat\n"
        # the worker's cached copy follows
        assert (workspace.cache.directory / MEMORY_FILE).read_text() == await workspace.text()
        assert await _reply(context, "/tool memory_read {}", "t2") == (
            "tool memory_read returned: - likes tea\n\n- has a cat\n"
        )
        # the worker gives the run back: its token no longer holds a lease
        async with world.pool.connection() as conn:
            await run_release(conn, claimed.run_id, claimed.lease_token, reason="test")
        with pytest.raises(MemoryRefused):
            await memory.check_lease()
        refused = "this run no longer holds its lease; memory is left unchanged"
        for query in (
            '/tool memory_append {"text": "- late"}',
            '/tool memory_replace_section {"heading": "Pets", "content": "a dog"}',
            "/tool memory_read {}",
        ):
            name = query.split()[1]
            assert await _reply(context, query, f"t-{name}") == f"tool {name} failed: {refused}"
        assert await workspace.text() == "- likes tea\n\n- has a cat\n"


async def test_memory_is_refused_to_another_run_and_outside_a_worker(
    world: World, tmp_path: Path
) -> None:
    claimed = await _claimed(world)
    workspace = await _workspace(world, tmp_path, claimed.uid)
    await workspace.put("notes\n")
    context = _memory_context(claimed, tmp_path / "work")
    query = '/tool memory_append {"text": "x"}'
    assert await _reply(context, query, "no-worker") == (
        "tool memory_append failed: memory tools work only in a run executed by a yuxi worker"
    )
    other = LeasedRunMemory(world.pool, uuid4(), claimed.uid, claimed.lease_token, workspace.cache)
    with run_services(RunServices(memory=other)):
        assert await _reply(context, query, "other-run") == (
            "tool memory_append failed: memory belongs to another run; refused"
        )
    assert await workspace.text() == "notes\n"


async def test_an_edit_over_64_kib_is_a_tool_error_and_changes_nothing(
    world: World, tmp_path: Path
) -> None:
    claimed = await _claimed(world)
    workspace = await _workspace(world, tmp_path, claimed.uid)
    full = "x" * (PROMPT_LIMIT - 10) + "\n"
    await workspace.put(full)
    context = _memory_context(claimed, tmp_path / "work")
    with run_services(
        RunServices(
            memory=LeasedRunMemory(
                world.pool, claimed.run_id, claimed.uid, claimed.lease_token, workspace.cache
            )
        )
    ):
        reply = await _reply(context, '/tool memory_append {"text": "0123456789"}', "big")
    assert reply == (
        "tool memory_append failed: agents/MEMORY.md would be 65539 bytes;"
        " the limit is 65536 bytes (64 KiB)"
    )
    assert await workspace.text() == full


async def test_memory_read_shows_what_an_agent_may_see(world: World, tmp_path: Path) -> None:
    """No HTML comments (the user's notes), at most 64 KiB; and a file over 64 KiB is
    refused to an edit."""
    claimed = await _claimed(world)
    workspace = await _workspace(world, tmp_path, claimed.uid)
    memory = LeasedRunMemory(
        world.pool, claimed.run_id, claimed.uid, claimed.lease_token, workspace.cache
    )
    with pytest.raises(MemoryRefused, match="does not exist"):
        await memory.read()
    await workspace.put("<!-- for me only -->\n- likes tea\n")
    assert await memory.read() == "\n- likes tea\n"
    await workspace.put("y" * (PROMPT_LIMIT + 5))
    text = await memory.read()
    assert (
        text
        == "y" * PROMPT_LIMIT + "\n\n[agents/MEMORY.md was cut at 64 KiB; the rest is not shown]"
    )
    with pytest.raises(MemoryRefused, match="is over 65536 bytes"):
        await memory.edit(lambda current: current + "z")
    assert await workspace.text() == "y" * (PROMPT_LIMIT + 5)


async def test_concurrent_edits_of_two_runs_all_land(world: World, tmp_path: Path) -> None:
    """Two runs of the user (two workers, two homes) append at once: the store's
    compare-and-swap makes the edits apply one after the other; none is lost."""
    first, second = await _claimed(world), await _claimed(world)
    workspace = await _workspace(world, tmp_path / "a", first.uid)
    await workspace.put("- start\n")
    other = await _workspace(world, tmp_path / "b", first.uid)
    memories = [
        LeasedRunMemory(world.pool, first.run_id, first.uid, first.lease_token, workspace.cache),
        LeasedRunMemory(world.pool, second.run_id, second.uid, second.lease_token, other.cache),
    ]

    async def append(i: int) -> int:
        return await memories[i % 2].edit(lambda text, i=i: text + f"- note {i}\n")

    await asyncio.gather(*(append(i) for i in range(6)))
    lines = (await workspace.text() or "").splitlines()
    assert lines[0] == "- start" and sorted(lines[1:]) == [f"- note {i}" for i in range(6)]
