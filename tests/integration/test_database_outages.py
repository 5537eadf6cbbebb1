"""Workers through database outages, with real processes and a real PostgreSQL: a
server restart, a stopped server, every connection terminated, a worker killed while it
holds a delivery, a run (and a subagent's child run) cut mid-graph by a lost connection,
an event append whose reply is lost, `yuxi up` through a stopped database.

A restart and server-wide settings need a server of the test's own (an embedded one in
a temporary directory: ``DedicatedServer``), whichever server the session uses; the
rest runs on the session's server, PostgreSQL 15 included.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import psycopg
import pytest

from tests.integration.conftest import World
from tests.integration.worker_harness import (
    backend_waiting,
    completed,
    dedicated_server,
    migrated_database,
    running_worker,
    seeded_world,
    terminate_backends,
    wait_for_status,
    wait_until,
    worker_process,
)
from yuxi.worker.app import Recovery


async def _counter(world: World, name: str) -> int:
    return int(
        await world.value("SELECT value FROM yuxi.maintenance_counters WHERE name = %s", name)
    )


async def _submit_and_complete(world: World, thread: UUID, text: str, within: float) -> float:
    """Seconds from submitting ``text`` to its run completing."""
    started = time.monotonic()
    info = await world.submit(thread, text)
    await completed(world, info.run_id, within=within)
    return time.monotonic() - started


async def test_a_worker_outlives_a_postgresql_restart(tmp_path: Path) -> None:
    with dedicated_server() as server:
        url = migrated_database(server.admin_url)
        async with seeded_world(url) as world, worker_process(url, tmp_path / "w") as worker:
            thread = await world.thread()
            await _submit_and_complete(world, thread, "before", within=30)

            server.restart()
            restarted = time.monotonic()
            # the world's own pooled connections died too: the first use may fail
            await world.pool.check()
            info = await world.submit(thread, "after the restart")
            await completed(world, info.run_id, within=10)
            assert time.monotonic() - restarted < 10
            assert worker.alive, worker.log()

            server.restart()
            await world.pool.check()
            await _submit_and_complete(world, thread, "after a second restart", within=10)
            assert worker.alive, worker.log()
            # one registration per process: the ones the outages cut off are gone
            assert await world.value("SELECT count(*) FROM procrastinate_workers") == 1
        log = worker.log()
        assert "restarting procrastinate's worker" in log, log
        assert "Traceback" not in log, log


async def test_a_worker_waits_out_a_stopped_server(tmp_path: Path) -> None:
    """The server is down for 5 s, longer than a pool's reconnection round: the worker is
    still there when it is back and takes the next run within 10 s; the run that was
    under way completes (its 5 s lease may have run out meanwhile: then the reconciler
    gave it its second attempt)."""
    with dedicated_server() as server:
        url = migrated_database(server.admin_url)
        async with seeded_world(url) as world, worker_process(url, tmp_path / "w") as worker:
            await world.execute("UPDATE yuxi.agents SET max_run_attempts = 2")
            thread = await world.thread()
            await _submit_and_complete(world, thread, "before", within=30)
            other = await world.thread()
            in_flight = await world.submit(other, "/sleep 1")
            await wait_for_status(world, in_flight.run_id, {"running"}, within=30)
            server.stop()
            await asyncio.sleep(5)
            server.start()
            started = time.monotonic()
            await world.pool.check()
            info = await world.submit(thread, "after the outage")
            await completed(world, info.run_id, within=10)
            assert time.monotonic() - started < 10
            await completed(world, in_flight.run_id, within=30)
            assert worker.alive, worker.log()
        log = worker.log()
        assert "restarting procrastinate's worker" in log, log
        assert "Traceback" not in log, log


async def test_a_worker_outlives_every_connection_terminated(
    world: World, db_url: str, tmp_path: Path
) -> None:
    async with worker_process(db_url, tmp_path / "w") as worker:
        thread = await world.thread()
        await _submit_and_complete(world, thread, "before", within=30)
        for round_ in range(3):
            assert await terminate_backends(db_url) > 0
            await world.pool.check()
            await _submit_and_complete(world, thread, f"after round {round_}", within=10)
            assert worker.alive, worker.log()
    assert "Traceback" not in worker.log(), worker.log()


async def test_a_run_in_flight_through_a_restart_completes(tmp_path: Path) -> None:
    with dedicated_server() as server:
        url = migrated_database(server.admin_url)
        async with seeded_world(url) as world, worker_process(url, tmp_path / "w") as worker:
            await world.execute("UPDATE yuxi.agents SET max_run_attempts = 2")
            thread = await world.thread()
            info = await world.submit(thread, "/sleep 2")
            await wait_for_status(world, info.run_id, {"running"}, within=30)
            server.restart()
            await world.pool.check()
            await completed(world, info.run_id, within=30)
            # the attempt went on through the restart, or was given back and retried
            outcomes = await world.fetch(
                "SELECT outcome FROM yuxi.agent_run_attempts WHERE run_id = %s ORDER BY attempt_no",
                info.run_id,
            )
            assert outcomes in ([("completed",)], [("released",), ("completed",)]), outcomes
            assert worker.alive, worker.log()


async def test_a_delivery_held_by_a_killed_worker_is_redelivered_once(
    world: World, db_url: str, tmp_path: Path
) -> None:
    """The operator's repro: a worker fetched the delivery and was SIGKILLed while its
    claim waited for the run's row lock. The server cancels the dead worker's claim
    (client_connection_check_interval), so the run stays pending, its job `doing` under
    a worker that no longer heartbeats; a live worker re-delivers it once."""
    thread = await world.thread()
    info = await world.submit(thread, "hello")
    async with await psycopg.AsyncConnection.connect(db_url) as holder:
        await holder.execute(
            "SELECT 1 FROM yuxi.agent_runs WHERE run_id = %s FOR UPDATE", (info.run_id,)
        )
        async with worker_process(db_url, tmp_path / "doomed") as doomed:
            claim = await backend_waiting(
                db_url, "wait_event_type = 'Lock' AND query LIKE '%run_claim%'"
            )
            doomed.kill()
            # the server notices its client is gone and cancels the claim
            await wait_until(lambda: _gone(db_url, claim))
        await holder.rollback()
    assert await world.fetch(
        "SELECT r.status, r.attempt_count, j.status::text FROM yuxi.agent_runs r"
        " JOIN procrastinate_jobs j ON j.id = r.delivery_job_id WHERE r.run_id = %s",
        info.run_id,
    ) == [("pending", 0, "doing")]
    stalled_job = await world.value(
        "SELECT delivery_job_id FROM yuxi.agent_runs WHERE run_id = %s", info.run_id
    )

    recovery = Recovery(heartbeat_seconds=0.5, stalled_seconds=3.0)
    async with running_worker(db_url, tmp_path / "survivor", recovery=recovery):
        await completed(world, info.run_id, within=30)
        # the dead worker's maintenance jobs, left `doing`, are pruned too
        await wait_until(lambda: _jobs_of_dead_workers(world), within=20)

    assert (
        await world.value(
            "SELECT attempt_count FROM yuxi.agent_runs WHERE run_id = %s", info.run_id
        )
        == 1
    )
    assert (
        await world.value(
            "SELECT count(*) FROM yuxi.messages WHERE thread_id = %s AND role = 'assistant'",
            thread,
        )
        == 1
    )
    assert await _counter(world, "redelivered_stalled") == 1
    assert (
        await world.value("SELECT count(*) FROM procrastinate_jobs WHERE id = %s", stalled_job) == 0
    )


async def _gone(url: str, pid: int) -> bool:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
        row = await cur.fetchone()
    return row == (0,)


async def _jobs_of_dead_workers(world: World) -> bool:
    """No job is left `doing` except under a worker that still heartbeats."""
    left = await world.value(
        "SELECT count(*) FROM procrastinate_jobs j LEFT JOIN procrastinate_workers w"
        " ON w.id = j.worker_id WHERE j.status = 'doing'"
        " AND (w.id IS NULL OR w.last_heartbeat < now() - interval '3 seconds')"
    )
    return bool(left == 0)


@pytest.mark.parametrize("infra_retries", [1, 0])
async def test_a_run_cut_by_a_lost_connection_is_retried_as_the_infrastructure_limit_says(
    world: World, db_url: str, tmp_path: Path, infra_retries: int
) -> None:
    """The checkpointer's connection is terminated mid-query (the test holds a lock its
    query waits for): the graph fails with AdminShutdown, which is not the run's fault.
    With infrastructure retries left (YUXI_INFRA_RETRIES) the run goes back to pending
    and completes, its agent's max_run_attempts (1) untouched; without, it fails with
    database_unavailable, not OperationalError."""
    thread = await world.thread()
    async with running_worker(db_url, tmp_path, infra_retries=infra_retries):
        async with await psycopg.AsyncConnection.connect(db_url) as holder:
            await holder.execute("LOCK TABLE public.checkpoints IN ACCESS EXCLUSIVE MODE")
            info = await world.submit(thread, "hello")
            checkpointer = await backend_waiting(
                db_url, "wait_event_type = 'Lock' AND query ILIKE '%checkpoint%'"
            )
            assert await terminate_backends(db_url, f"pid = {checkpointer}") == 1
            await holder.rollback()
        status = await wait_for_status(world, info.run_id)

    attempts_made = await world.fetch(
        "SELECT outcome, detail FROM yuxi.agent_run_attempts WHERE run_id = %s ORDER BY attempt_no",
        info.run_id,
    )
    run = await world.fetch(
        "SELECT error_type, error_message, attempt_count, infra_retries FROM yuxi.agent_runs"
        " WHERE run_id = %s",
        info.run_id,
    )
    events = [
        e
        for (e,) in await world.fetch(
            "SELECT event FROM yuxi.run_events WHERE run_id = %s ORDER BY seq", info.run_id
        )
    ]
    assert await world.value("SELECT max_run_attempts FROM yuxi.agents WHERE slug = 'chatbot'") == 1
    if infra_retries == 1:
        assert status == "completed", run
        assert run == [(None, None, 2, 1)]
        assert [outcome for outcome, _ in attempts_made] == ["released", "completed"]
        assert attempts_made[0][1].startswith("database_unavailable: ")
        assert await _counter(world, "released_after_error") == 1
        assert events[0] == "metadata" and events.count("metadata") == 2
    else:
        assert status == "failed"
        assert run == [
            (
                "database_unavailable",
                "the worker lost its connection to the database (AdminShutdown);"
                " no infrastructure retry left (0 used)",
                1,
                0,
            )
        ]
        assert [outcome for outcome, _ in attempts_made] == ["failed"]
        assert events[-2:] == ["error", "end"]
        assert await _counter(world, "released_after_error") == 0


# The first `metadata` append of the database commits locally and then waits for a
# synchronous standby that does not exist: its connection is terminated while it waits,
# so the worker never hears back about a commit that happened.
_HANG_FIRST_METADATA = """
CREATE TABLE public.hung (at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION public.hang_first_metadata() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.event = 'metadata' AND NOT EXISTS (SELECT FROM public.hung) THEN
        INSERT INTO public.hung DEFAULT VALUES;
        PERFORM set_config('synchronous_commit', 'on', true);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER hang_first_metadata AFTER INSERT ON yuxi.run_events
    FOR EACH ROW EXECUTE FUNCTION public.hang_first_metadata();
"""


async def test_an_append_whose_reply_is_lost_is_stored_once(tmp_path: Path) -> None:
    """The attempt's metadata event is appended by the manifest's commit; its reply is
    lost (the backend is killed after the commit), the worker sends the commit again, and
    the event is stored once."""
    with dedicated_server() as server:
        with psycopg.connect(server.admin_url, autocommit=True) as conn:
            # commits wait for a standby only where a transaction asks (synchronous_commit)
            conn.execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
            conn.execute("ALTER SYSTEM SET synchronous_commit = 'local'")
            conn.execute("SELECT pg_reload_conf()")
        url = migrated_database(server.admin_url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(_HANG_FIRST_METADATA)
        async with seeded_world(url) as world, running_worker(url, tmp_path / "w"):
            thread = await world.thread()
            info = await world.submit(thread, "/sleep 1")
            append = await backend_waiting(url, "wait_event = 'SyncRep'")
            assert await terminate_backends(url, f"pid = {append}") == 1
            await completed(world, info.run_id)
            assert await world.value("SELECT count(*) FROM public.hung") == 1  # it committed
            events = await world.fetch(
                "SELECT seq, event FROM yuxi.run_events WHERE run_id = %s ORDER BY seq",
                info.run_id,
            )
    assert events == [(1, "metadata"), (2, "messages"), (3, "end")]


async def test_a_child_run_cut_by_a_lost_connection_is_taken_again_by_its_parent(
    world: World, db_url: str, tmp_path: Path
) -> None:
    """A subagent's checkpointer query is terminated while its parent waits in the task
    tool: the child is given back (its budget allows) and the parent claims it again in
    place, so the parent's tool call gets the child's answer, not 'pending'."""
    await world.execute("UPDATE yuxi.agents SET max_run_attempts = 2")
    thread = await world.thread()
    task = "/tool task " + json.dumps({"subagent": "helper", "description": "/sleep 1"})
    async with running_worker(db_url, tmp_path):
        info = await world.submit(thread, task)
        child = await _child_running(world, info.run_id)

        async def sleeping() -> bool:  # its input is checkpointed: the model step sleeps
            return bool(
                await world.value(
                    "SELECT count(*) FROM public.checkpoints WHERE metadata ->> 'yuxi_run_id' = %s",
                    str(child),
                )
            )

        await wait_until(sleeping)
        async with await psycopg.AsyncConnection.connect(db_url) as holder:
            # the child's first checkpoint write after its sleep waits for this lock
            await holder.execute("LOCK TABLE public.checkpoints IN ACCESS EXCLUSIVE MODE")
            checkpointer = await backend_waiting(
                db_url, "wait_event_type = 'Lock' AND query ILIKE '%checkpoint%'"
            )
            assert await terminate_backends(db_url, f"pid = {checkpointer}") == 1
            await holder.rollback()
        await completed(world, info.run_id)
    reply = await world.value(
        "SELECT m.content FROM yuxi.agent_runs r"
        " JOIN yuxi.messages m ON m.id = r.output_message_id WHERE r.run_id = %s",
        info.run_id,
    )
    assert reply == "tool task returned: slept 1"
    assert await world.fetch(
        "SELECT outcome FROM yuxi.agent_run_attempts WHERE run_id = %s ORDER BY attempt_no",
        child,
    ) == [("released",), ("completed",)]


async def _child_running(world: World, parent: UUID | None) -> UUID:
    async def started() -> bool:
        return bool(
            await world.value(
                "SELECT count(*) FROM yuxi.agent_runs WHERE created_by_run_id = %s"
                " AND status = 'running'",
                parent,
            )
        )

    await wait_until(started)
    query = "SELECT run_id FROM yuxi.agent_runs WHERE created_by_run_id = %s"
    return UUID(str(await world.value(query, parent)))


async def test_a_worker_started_while_the_database_is_down_waits_for_it(tmp_path: Path) -> None:
    with dedicated_server() as server:
        url = migrated_database(server.admin_url)
        async with seeded_world(url) as world:
            thread = await world.thread()
            server.stop()
            async with worker_process(url, tmp_path / "w") as worker:
                # its first step, checking the server key, waits for the database
                # instead of exiting
                async def waiting() -> bool:
                    return "cannot reach the database to check the server key" in worker.log()

                await wait_until(waiting, within=30)
                await asyncio.sleep(1)
                assert worker.alive, worker.log()
                server.start()
                await world.pool.check()
                await _submit_and_complete(world, thread, "hello", within=10)
        assert "reached the database again to check the server key" in worker.log(), worker.log()
        assert "Traceback" not in worker.log(), worker.log()


def test_yuxi_up_serves_runs_again_after_its_database_was_down(tmp_path: Path) -> None:
    """`yuxi up` on an external database: while it is stopped, health says
    `database: down`; once it is back, the worker half takes the next run."""
    with dedicated_server() as server:
        url = migrated_database(server.admin_url)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        env = {
            **os.environ,
            "YUXI_HOME": str(tmp_path / "home"),
            "YUXI_DATABASE_URL": url,
            "YUXI_PORT": str(port),
        }
        log_path = tmp_path / "yuxi-up.log"
        with log_path.open("a") as log:
            up = subprocess.Popen(
                [sys.executable, "-m", "yuxi.cli", "up"],
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        try:
            token = _read_until(up, "admin token (shown once): ")
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers) as client:
                _wait_health(client, lambda h: h["database"] == "ok" and h["workers"] >= 1)
                server.stop()
                _wait_health(client, lambda h: h["database"] == "down")
                server.start()
                started = time.monotonic()
                _wait_health(client, lambda h: h["database"] == "ok" and h["workers"] >= 1)
                thread = client.post("/api/chat/thread", json={"agent_id": "chatbot"}).json()["id"]
                submitted = client.post(
                    "/api/agent/runs", json={"thread_id": thread, "query": "hi"}
                )
                assert submitted.status_code == 202, submitted.text
                run_id = submitted.json()["run_id"]
                while client.get(f"/api/agent/runs/{run_id}").json()["status"] != "completed":
                    assert time.monotonic() - started < 10, log_path.read_text()
                    time.sleep(0.1)
            up.send_signal(signal.SIGINT)
            assert up.wait(timeout=60) == 0, log_path.read_text()
        finally:
            if up.poll() is None:
                up.kill()
            if up.stdout is not None:
                up.stdout.close()
        assert "Traceback" not in log_path.read_text(), log_path.read_text()


def _read_until(process: subprocess.Popen[str], prefix: str) -> str:
    assert process.stdout is not None
    while True:
        line = process.stdout.readline()
        assert line, f"yuxi up exited before printing {prefix!r}"
        if line.startswith(prefix):
            return line[len(prefix) :].strip()


def _wait_health(client: httpx.Client, ok: Callable[[dict[str, Any]], bool]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            if ok(client.get("/api/system/health").json()):
                return
        time.sleep(0.1)
    raise AssertionError("health never said so")
