"""No host path leaves the server: what a real run streams and stores shows its workdir
relative to the user's workspace, while the tools work in the absolute directory."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from tests.integration.conftest import World
from tests.integration.worker_harness import completed, running_worker, wait_for_status


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """YUXI_HOME of the worker, resolved as the worker resolves it."""
    return (tmp_path / "home").resolve()


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A directory outside YUXI_HOME."""
    return (tmp_path / "elsewhere").resolve()


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


async def _client_texts(world: World, run_id: UUID | None) -> list[str]:
    """Every text of the run a client can read: events, stored replies, manifest, error."""
    texts: list[str] = []
    for (payload,) in await world.fetch(
        "SELECT payload FROM yuxi.run_events WHERE run_id = %s ORDER BY seq", run_id
    ):
        texts.extend(_strings(payload))
    for content, metadata in await world.fetch(
        "SELECT content, metadata FROM yuxi.messages WHERE run_id = %s AND role <> 'user'",
        run_id,
    ):
        texts.append(content)
        texts.extend(_strings(metadata))
    manifest, error_message = (
        await world.fetch(
            "SELECT manifest, error_message FROM yuxi.agent_runs WHERE run_id = %s", run_id
        )
    )[0]
    texts.extend(_strings(manifest))
    texts.extend([error_message] if error_message else [])
    return texts


def _assert_no_host_path(texts: list[str], *hidden: Path) -> None:
    for text in texts:
        assert not text.startswith("/"), text
        for path in hidden:
            assert str(path) not in text, text


def _put_file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def _metadata(world: World, run_id: UUID | None) -> dict[str, Any]:
    payload: dict[str, Any] = await world.value(
        "SELECT payload FROM yuxi.run_events WHERE run_id = %s AND event = 'metadata'", run_id
    )
    return payload


async def _thread_in_project(world: World, workdir: Path) -> UUID:
    project = await world.value(
        "INSERT INTO yuxi.projects (uid, name, workdir_path) VALUES (%s, 'demo', %s) RETURNING id",
        world.alice,
        str(workdir),
    )
    thread: UUID = await world.value(
        "SELECT (yuxi.thread_create(%s, 'chatbot', %s, '')).thread_id", world.alice, project
    )
    return thread


async def test_a_run_streams_its_workdir_relative_to_the_workspace(
    world: World, db_url: str, home: Path
) -> None:
    thread = await world.thread()
    async with running_worker(db_url, home):
        info = await world.submit(
            thread, '/tool write_file {"path": "notes/a.txt", "content": "kept"}'
        )
        await completed(world, info.run_id)
    assert (await _metadata(world, info.run_id))["workdir"] == f"threads/{thread}"
    _assert_no_host_path(await _client_texts(world, info.run_id), home)
    # the tool itself worked in the absolute directory
    workdir = home / "workspaces" / str(world.alice) / "threads" / str(thread)
    assert (workdir / "notes" / "a.txt").read_text() == "kept"


async def test_a_project_workdir_in_the_workspace_is_shown_relative(
    world: World, db_url: str, home: Path
) -> None:
    workdir = home / "workspaces" / str(world.alice) / "projects" / "demo"
    thread = await _thread_in_project(world, workdir)
    async with running_worker(db_url, home):
        info = await world.submit(thread, "hello")
        await completed(world, info.run_id)
    assert (await _metadata(world, info.run_id))["workdir"] == "projects/demo"
    _assert_no_host_path(await _client_texts(world, info.run_id), home)
    assert workdir.is_dir()


async def test_a_project_directory_outside_the_workspace_is_never_used(
    world: World, db_url: str, home: Path, elsewhere: Path
) -> None:
    """Files live in the database: a project whose stored directory lies outside the
    workspace (a host path) keeps its conversations' files in their own workdir tree,
    threads/<id>, like a conversation without a project; the host path is never read,
    written or shown."""
    thread = await _thread_in_project(world, elsewhere)
    async with running_worker(db_url, home):
        info = await world.submit(thread, "hello")
        await completed(world, info.run_id)
    assert (await _metadata(world, info.run_id))["workdir"] == f"threads/{thread}"
    assert not await asyncio.to_thread(os.path.exists, elsewhere)
    _assert_no_host_path(await _client_texts(world, info.run_id), home, elsewhere)


async def test_a_failure_names_no_host_path(world: World, db_url: str, home: Path) -> None:
    thread = await world.thread()
    # threads/ is a file: the workdir cannot be created (whoever runs the test, root too)
    _put_file(home / "workspaces" / str(world.alice) / "threads", "not a directory")
    async with running_worker(db_url, home):
        info = await world.submit(thread, "hello")
        assert await wait_for_status(world, info.run_id) == "failed"
    error_type, error_message = (
        await world.fetch(
            "SELECT error_type, error_message FROM yuxi.agent_runs WHERE run_id = %s",
            info.run_id,
        )
    )[0]
    assert error_type == "NotADirectoryError"
    assert error_message == f"[Errno 20] Not a directory: 'threads/{thread}'"
    error = await world.value(
        "SELECT payload FROM yuxi.run_events WHERE run_id = %s AND event = 'error'", info.run_id
    )
    assert error == {"error_type": error_type, "message": error_message}
    _assert_no_host_path(await _client_texts(world, info.run_id), home)


async def test_a_file_at_a_projects_host_path_is_left_alone(
    world: World, db_url: str, home: Path, elsewhere: Path
) -> None:
    """Before the file store a file at the project's host path failed the run
    (``File exists``); now that path is not the workdir at all: the run completes and
    the file is as it was."""
    _put_file(elsewhere, "a file, not a directory")
    thread = await _thread_in_project(world, elsewhere)
    async with running_worker(db_url, home):
        info = await world.submit(thread, "hello")
        await completed(world, info.run_id)
    assert await asyncio.to_thread(elsewhere.read_text) == "a file, not a directory"
    _assert_no_host_path(await _client_texts(world, info.run_id), home, elsewhere)
