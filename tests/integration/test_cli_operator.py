"""The operator commands (agent, user list, queue show) against a real database."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

import click
import pytest
from click.testing import CliRunner, Result

from tests.integration.conftest import World
from yuxi.cli import main
from yuxi.queue.users import token_hash, user_create


def _invoke(url: str, args: list[str], stdin: str | None) -> Result:
    return CliRunner().invoke(main, args, input=stdin, env={"YUXI_DATABASE_URL": url})


async def _cli(world: World, *args: str, stdin: str | None = None) -> Result:
    """Runs the command in a thread: it runs an event loop of its own."""
    return await asyncio.to_thread(_invoke, world.url, list(args), stdin)


def _ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result


def _refused(result: Result, code: int, message: str) -> None:
    """Exit code ``code``, ``message`` on stderr, nothing on stdout, no traceback."""
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def _lines(result: Result) -> list[list[str]]:
    """The table on stdout as cells (columns are two or more spaces apart)."""
    return [line.split() for line in result.stdout.splitlines() if line.strip()]


async def _agent_slugs(world: World) -> list[str]:
    return [row[0] for row in await world.fetch("SELECT slug FROM yuxi.agents ORDER BY slug")]


# ---------------------------------------------------------------------------------
# agents


async def test_agent_create_saves_what_the_api_reads(world: World, tmp_path: Path) -> None:
    file = tmp_path / "notes.json"
    file.write_text(
        json.dumps(
            {
                "slug": "notes",
                "name": "Notes",
                "backend_id": "chatbot",
                "description": "Takes notes",
                "config": {"context": {"tools": ["write_file"]}},
                "share_scope": "selected",
                "shared_with": [str(world.alice)],
                "max_run_attempts": 2,
            }
        )
    )
    created = _ok(await _cli(world, "agent", "create", str(file)))
    assert created.stderr.strip() == "created agent notes"

    # the API's read (GET /api/agents): alice sees it with its config, bob does not
    visible_to_alice = await world.fetch(
        "SELECT slug, name, backend_id, config_json, share_scope"
        " FROM yuxi.agents_visible(%s) WHERE slug = 'notes'",
        world.alice,
    )
    assert visible_to_alice == [
        ("notes", "Notes", "chatbot", {"context": {"tools": ["write_file"]}}, "selected")
    ]
    assert await world.value("SELECT yuxi.agent_visible_to('notes', %s)", world.bob) is False
    assert await world.value("SELECT max_run_attempts FROM yuxi.agents WHERE slug = 'notes'") == 2

    listed = _ok(await _cli(world, "agent", "list"))
    header, *rows = _lines(listed)
    assert header[:3] == ["SLUG", "NAME", "BACKEND"]
    assert [row[0] for row in rows] == ["chatbot", "helper", "notes", "private"]
    notes = next(row for row in rows if row[0] == "notes")
    assert notes[1:7] == ["Notes", "chatbot", "selected", "alice", "no", "live"]

    as_json = json.loads(_ok(await _cli(world, "agent", "list", "--json")).stdout)
    by_slug = {agent["slug"]: agent for agent in as_json}
    assert by_slug["notes"]["shared_with"] == [str(world.alice)]
    assert by_slug["notes"]["shared_with_names"] == ["alice"]
    assert by_slug["helper"]["is_subagent"] is True
    assert by_slug["chatbot"]["config_json"] == {"context": {"model": "builtin:scripted"}}


async def test_agent_create_reads_stdin(world: World) -> None:
    body = '{"slug": "piped", "name": "Piped", "backend_id": "subagent", "is_subagent": true}'
    _ok(await _cli(world, "agent", "create", "-", stdin=body))
    rows = await world.fetch(
        "SELECT backend_id, is_subagent, share_scope FROM yuxi.agents WHERE slug = 'piped'"
    )
    assert rows == [("subagent", True, "all")]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"slug": "x", "name": "X", "backend_id": "nope"}', "unknown agent backend 'nope'"),
        (
            '{"slug": "x", "name": "X", "backend_id": "chatbot", "colour": "red"}',
            "unknown field `colour`",
        ),
        (
            '{"slug": "x", "name": "X", "backend_id": "chatbot", "config": {"context": 3}}',
            'config must be an object like {"context": {...}}',
        ),
        (
            '{"slug": "x", "name": "X", "backend_id": "chatbot", "max_run_attempts": 0}',
            "`$.max_run_attempts`",
        ),
        (
            '{"slug": "x", "name": "X", "backend_id": "chatbot", "share_scope": "world"}',
            "`$.share_scope`",
        ),
        ('{"slug": "Bad Slug", "name": "X", "backend_id": "chatbot"}', "an agent id is 1-63"),
        ('{"slug": "x", "name": " ", "backend_id": "chatbot"}', "an agent name is 1-200"),
        ('{"slug": "chatbot", "name": "Again", "backend_id": "chatbot"}', "already exists"),
        ('{"name": "X"}', "missing required field `backend_id`"),
        ('{"slug": "x", ', "malformed JSON"),
        ("[]", "Expected `object`, got `array`"),
    ],
)
async def test_agent_create_refuses_what_the_api_refuses(
    world: World, body: str, message: str
) -> None:
    before = await _agent_slugs(world)
    _refused(await _cli(world, "agent", "create", "-", stdin=body), 1, message)
    assert await _agent_slugs(world) == before
    assert await world.value("SELECT name FROM yuxi.agents WHERE slug = 'chatbot'") == "Chatbot"


async def test_agent_create_refuses_a_missing_file(world: World, tmp_path: Path) -> None:
    result = await _cli(world, "agent", "create", str(tmp_path / "missing.json"))
    _refused(result, 2, "No such file or directory")


async def test_agent_show_then_update_replaces_the_settings(world: World) -> None:
    shown = json.loads(_ok(await _cli(world, "agent", "show", "private")).stdout)
    assert shown == {
        "slug": "private",
        "name": "Private",
        "description": "",
        "backend_id": "chatbot",
        "config": {"context": {}},
        "share_scope": "selected",
        "shared_with": [str(world.alice)],
        "is_subagent": False,
        "max_run_attempts": 1,
    }
    shown["shared_with"] = [str(world.bob)]
    shown["config"] = {"context": {"model": "builtin:scripted"}}
    updated = _ok(await _cli(world, "agent", "update", "-", stdin=json.dumps(shown)))
    assert updated.stderr.strip() == "updated agent private"
    assert await world.value("SELECT yuxi.agent_visible_to('private', %s)", world.bob) is True
    assert await world.value("SELECT yuxi.agent_visible_to('private', %s)", world.alice) is False
    config = await world.value("SELECT config_json FROM yuxi.agents WHERE slug = 'private'")
    assert config == {"context": {"model": "builtin:scripted"}}

    ghost = '{"slug": "ghost", "name": "Ghost", "backend_id": "chatbot"}'
    _refused(await _cli(world, "agent", "update", "-", stdin=ghost), 1, "agent ghost not found")
    _refused(await _cli(world, "agent", "show", "ghost"), 1, "agent ghost not found")


# ---------------------------------------------------------------------------------
# users


async def test_user_list_counts_tokens_and_never_shows_them(world: World) -> None:
    async with world.pool.connection() as conn:
        carol, token = await user_create(conn, "carol", is_admin=True)
    await world.execute(
        "INSERT INTO yuxi.api_tokens (user_id, token_hash, revoked_at) VALUES (%s, %s, now())",
        carol,
        token_hash("yx_revoked"),
    )
    await world.execute("UPDATE yuxi.users SET deleted_at = now() WHERE id = %s", world.bob)

    listed = _ok(await _cli(world, "user", "list"))
    assert token not in listed.stdout
    assert token_hash(token).hex() not in listed.stdout
    header, *rows = _lines(listed)
    assert header == ["NAME", "ADMIN", "TOKENS", "LAST", "USED", "CREATED", "ID"]
    assert [(row[0], row[1], row[2], row[-1]) for row in rows] == [
        ("admin", "yes", "0", str(world.admin)),
        ("alice", "no", "0", str(world.alice)),
        ("carol", "yes", "1", str(carol)),
    ]

    as_json = json.loads(_ok(await _cli(world, "user", "list", "--json")).stdout)
    assert [(u["name"], u["is_admin"], u["active_tokens"]) for u in as_json] == [
        ("admin", True, 0),
        ("alice", False, 0),
        ("carol", True, 1),
    ]
    assert set(as_json[0]) == {
        "id",
        "name",
        "is_admin",
        "active_tokens",
        "last_used_at",
        "created_at",
    }


async def test_user_token_revoke_and_delete_from_the_cli(world: World) -> None:
    async with world.pool.connection() as conn:
        dora, first = await user_create(conn, "dora")

    issued = _ok(await _cli(world, "user", "token", "dora", "--label", "laptop"))
    second = issued.stdout.strip().splitlines()[-1]
    assert second.startswith("yx_") and second != first

    listed = json.loads(_ok(await _cli(world, "user", "tokens", "dora", "--json")).stdout)
    assert [t["name"] for t in listed] == ["laptop", "default"]
    assert first not in str(listed) and second not in str(listed)
    table = _ok(await _cli(world, "user", "tokens", "dora"))
    assert first not in table.stdout and token_hash(first).hex() not in table.stdout

    async def active() -> set[str]:
        rows = await world.fetch(
            "SELECT name FROM yuxi.api_tokens WHERE user_id = %s AND revoked_at IS NULL", dora
        )
        return {row[0] for row in rows}

    laptop = next(t["id"] for t in listed if t["name"] == "laptop")
    _ok(await _cli(world, "user", "revoke", "dora", laptop))
    assert await active() == {"default"}
    _refused(await _cli(world, "user", "revoke", "dora", laptop), 1, "not found")
    _refused(await _cli(world, "user", "revoke", "dora"), 2, "TOKEN_ID or --all")
    _ok(await _cli(world, "user", "revoke", "dora", "--all"))
    assert await active() == set()

    _refused(await _cli(world, "user", "delete", "nobody", "--yes"), 1, "user nobody not found")
    # without --yes it asks; answering no changes nothing
    declined = await _cli(world, "user", "delete", "dora", stdin="n\n")
    assert declined.exit_code == 1
    assert await world.value("SELECT deleted_at FROM yuxi.users WHERE id = %s", dora) is None
    _ok(await _cli(world, "user", "delete", "dora", "--yes"))
    assert await world.value("SELECT deleted_at IS NOT NULL FROM yuxi.users WHERE id = %s", dora)
    _refused(await _cli(world, "user", "token", "dora"), 1, "user dora not found")


# ---------------------------------------------------------------------------------
# queues


async def _busy_threads(world: World) -> dict[str, UUID]:
    """running: a pending run and two queued; paused: a failed run and one queued;
    idle: a completed run and nothing queued."""
    running, paused, idle = [await world.thread() for _ in range(3)]
    for query in ("first", "second", "third"):
        await world.submit(running, query, request_id=f"run-{query}")

    failed = await world.submit(paused, "will fail", request_id="paused-1")
    await world.submit(paused, "waits", request_id="paused-2")
    assert failed.run_id is not None
    await world.finish(
        await world.claim(failed.run_id), "failed", error_type="boom", error_message="boom"
    )

    done = await world.submit(idle, "done", request_id="idle-1")
    assert done.run_id is not None
    await world.complete(await world.claim(done.run_id))
    return {"running": running, "paused": paused, "idle": idle}


async def test_queue_show_lists_the_threads_with_work(world: World) -> None:
    threads = await _busy_threads(world)
    runs = dict(await world.fetch("SELECT thread_id, last_run_id FROM yuxi.conversations"))

    shown = _ok(await _cli(world, "queue", "show"))
    header, *rows = _lines(shown)
    assert header[:3] == ["THREAD", "STATUS", "REASON"]
    by_thread = {row[0]: row for row in rows}
    assert set(by_thread) == {str(threads["running"]), str(threads["paused"])}
    running = by_thread[str(threads["running"])]
    assert running[1:6] == ["running", "-", str(runs[threads["running"]]), "pending", "2"]
    assert running[-2:] == ["alice", "chatbot"]
    paused = by_thread[str(threads["paused"])]
    assert paused[1:6] == ["paused", "run_failed", str(runs[threads["paused"]]), "failed", "1"]

    as_json = json.loads(_ok(await _cli(world, "queue", "show", "--json")).stdout)
    assert [(q["thread_id"], q["status"], q["queued_count"]) for q in as_json] == [
        (str(threads["paused"]), "paused", 1),
        (str(threads["running"]), "running", 2),
    ]
    assert as_json[0]["can_continue"] is True


async def test_queue_show_with_nothing_to_show(world: World) -> None:
    result = _ok(await _cli(world, "queue", "show"))
    assert result.stdout == ""
    assert "no thread has running, interrupted, queued or paused work" in result.stderr
    assert json.loads(_ok(await _cli(world, "queue", "show", "--json")).stdout) == []


async def test_queue_show_thread_lists_requests_in_dispatch_order(world: World) -> None:
    thread = await world.thread()
    head = await world.submit(thread, "first", request_id="r-first")
    await world.submit(thread, "second", request_id="r-second")
    await world.submit(thread, "third", request_id="r-third")
    await world.submit(thread, "jump the queue", request_id="r-steer", queue_policy="steer")
    assert head.run_id is not None

    shown = _ok(await _cli(world, "queue", "show", str(thread)))
    state, table = shown.stdout.split("\n\n")
    assert "status:        running" in state
    assert f"blocking run:  {head.run_id} (pending)" in state
    assert "queued:        3" in state
    assert "owner:         alice" in state
    header, *rows = [line.split() for line in table.splitlines()]
    assert header[:4] == ["POS", "REQUEST", "POLICY", "STATUS"]
    assert [row[:4] for row in rows] == [
        ["-", "r-first", "enqueue", "dispatched"],
        ["1", "r-steer", "steer", "queued"],
        ["2", "r-second", "enqueue", "queued"],
        ["3", "r-third", "enqueue", "queued"],
    ]
    assert rows[0][5:7] == [str(head.run_id), "pending"]
    assert rows[1][-3:] == ["jump", "the", "queue"]

    # the head completes: the steer is dispatched next, the finished request drops out
    await world.complete(await world.claim(head.run_id))
    as_json = json.loads(_ok(await _cli(world, "queue", "show", str(thread), "--json")).stdout)
    assert as_json["queue"]["queued_count"] == 2
    assert [
        (r["request_id"], r["queue_position"], r["run_status"]) for r in as_json["requests"]
    ] == [
        ("r-steer", None, "pending"),
        ("r-second", 1, None),
        ("r-third", 2, None),
    ]
    everything = json.loads(
        _ok(await _cli(world, "queue", "show", str(thread), "--all", "--json")).stdout
    )
    assert [r["request_id"] for r in everything["requests"]] == [
        "r-first",
        "r-steer",
        "r-second",
        "r-third",
    ]
    assert everything["requests"][0]["run_status"] == "completed"


async def test_queue_show_thread_refuses_bad_ids(world: World) -> None:
    _refused(await _cli(world, "queue", "show", "not-a-uuid"), 2, "is not a valid UUID")
    _refused(await _cli(world, "queue", "show", "--all"), 2, "--all needs a THREAD_ID")
    unknown = "00000000-0000-4000-8000-000000000000"
    _refused(await _cli(world, "queue", "show", unknown), 1, f"thread {unknown} not found")
    deleted = await world.thread()
    await world.execute("SELECT yuxi.thread_delete(%s, %s)", world.alice, deleted)
    _refused(await _cli(world, "queue", "show", str(deleted)), 1, "not found")


# ---------------------------------------------------------------------------------
# the commands themselves


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for name, command in group.commands.items():
        found.append((*prefix, name))
        if isinstance(command, click.Group):
            found.extend(_commands(command, (*prefix, name)))
    return found


def test_every_command_and_option_has_help() -> None:
    paths = _commands(main)
    assert {("agent", "list"), ("agent", "create"), ("user", "list"), ("queue", "show")} <= set(
        paths
    )
    for path in paths:
        result = CliRunner().invoke(main, [*path, "--help"])
        assert result.exit_code == 0, path
        context = click.Context(main)
        command: Any = main
        for name in path:
            command = command.get_command(context, name)
        assert command.help, path
        for option in command.params:
            if isinstance(option, click.Option):
                assert option.help, (path, option.name)


def test_a_fresh_home_says_to_migrate_then_lists(tmp_path: Path) -> None:
    """As a real process on the embedded server of YUXI_HOME, as an operator runs it."""
    env = {**os.environ, "YUXI_HOME": str(tmp_path / "home")}
    env.pop("YUXI_DATABASE_URL", None)

    def yuxi(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "yuxi.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    before = yuxi("agent", "list")
    assert before.returncode == 1
    assert "yuxi db migrate" in before.stderr and "Traceback" not in before.stderr
    assert yuxi("db", "migrate").returncode == 0
    # migrate seeds the built-in agents
    assert [a["slug"] for a in json.loads(yuxi("agent", "list", "--json").stdout)] == ["chatbot"]
    assert json.loads(yuxi("queue", "show", "--json").stdout) == []
