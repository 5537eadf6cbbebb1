"""The state machines hold even against raw UPDATEs typed at a psql prompt."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from psycopg import errors

from tests.integration.conftest import World


@contextmanager
def refused(match: str | None = None) -> Iterator[None]:
    """Expects the guard triggers' illegal_transition (SQLSTATE YT001)."""
    with pytest.raises(psycopg.Error, match=match) as caught:
        yield
    assert caught.value.sqlstate == "YT001"


async def _running_run(world: World) -> tuple[str, str]:
    """A claimed run and its lease token."""
    info = await world.submit(await world.thread(), "x")
    assert info.run_id is not None
    claimed = await world.claim(info.run_id)
    return str(info.run_id), str(claimed.lease_token)


async def _append_one(world: World, run_id: str, token: str) -> None:
    await world.value(
        'SELECT yuxi.run_append_events(%s, %s, \'[{"event": "messages"}]\'::jsonb)', run_id, token
    )


async def _completed_run(world: World) -> str:
    info = await world.submit(await world.thread(), "x")
    assert info.run_id is not None
    await world.complete(await world.claim(info.run_id))
    return str(info.run_id)


@pytest.mark.parametrize(
    "assignment",
    [
        "status = 'running'",
        "status = 'pending'",
        "status = 'failed'",
        "error_message = 'rewritten'",
        "input_payload = '{}'",
    ],
)
async def test_completed_runs_are_final(world: World, assignment: str) -> None:
    run_id = await _completed_run(world)
    with refused():
        await world.execute(f"UPDATE yuxi.agent_runs SET {assignment} WHERE run_id = %s", run_id)


async def test_running_cannot_be_cancelled_without_a_cancel_request(world: World) -> None:
    info = await world.submit(await world.thread(), "x")
    assert info.run_id is not None
    await world.claim(info.run_id)
    with refused("cannot go from running to cancelled"):
        await world.execute(
            "UPDATE yuxi.agent_runs SET status = 'cancelled', lease_token = NULL,"
            " lease_expires_at = NULL, finished_at = now() WHERE run_id = %s",
            info.run_id,
        )


async def test_completed_needs_an_assistant_message_of_the_same_run(world: World) -> None:
    thread = await world.thread()
    info = await world.submit(thread, "x")
    assert info.run_id is not None
    await world.claim(info.run_id)
    complete = (
        "UPDATE yuxi.agent_runs SET status = 'completed', lease_token = NULL,"
        " lease_expires_at = NULL, finished_at = now(), output_message_id = %s WHERE run_id = %s"
    )
    with refused("without an assistant message"):
        await world.execute(complete, None, info.run_id)
    # the user's own message is not an output
    with refused("without an assistant message"):
        await world.execute(complete, info.message_id, info.run_id)
    other_run = await _completed_run(world)
    other_output = await world.value(
        "SELECT output_message_id FROM yuxi.agent_runs WHERE run_id = %s", other_run
    )
    with refused("without an assistant message"):
        await world.execute(complete, other_output, info.run_id)


async def test_runs_start_pending_and_one_is_active_per_thread(world: World) -> None:
    thread = await world.thread()
    info = await world.submit(thread, "x")
    insert = (
        "INSERT INTO yuxi.agent_runs (thread_id, uid, agent_slug, request_id, run_type, status)"
        " VALUES (%s, %s, 'chatbot', %s, 'chat', %s)"
    )
    with refused("starts pending"):
        await world.execute(insert, thread, world.alice, info.request_id, "running")
    with pytest.raises(errors.UniqueViolation, match="agent_runs_one_active_key"):
        await world.execute(insert, thread, world.alice, info.request_id, "pending")


async def test_requests_and_messages_keep_what_was_received(world: World) -> None:
    thread = await world.thread()
    await world.submit(thread, "running")
    queued = await world.submit(thread, "queued")
    with refused("cannot be rewritten"):
        await world.execute(
            "UPDATE yuxi.agent_run_requests SET input_payload = '{}' WHERE request_id = %s",
            queued.request_id,
        )
    with refused("cannot be rewritten"):
        await world.execute(
            "UPDATE yuxi.messages SET content = 'edited' WHERE id = %s", queued.message_id
        )
    with refused("cannot go from queued to rejected"):
        await world.execute(
            "UPDATE yuxi.agent_run_requests SET status = 'rejected' WHERE request_id = %s",
            queued.request_id,
        )
    # dispatching behind the queue's back would need a run; the check constraint refuses
    with pytest.raises(errors.CheckViolation):
        await world.execute(
            "UPDATE yuxi.agent_run_requests SET status = 'dispatched' WHERE request_id = %s",
            queued.request_id,
        )


async def test_two_pending_steers_are_impossible_even_by_hand(world: World) -> None:
    thread = await world.thread()
    await world.submit(thread, "running")
    one = await world.submit(thread, "one")
    two = await world.submit(thread, "two")
    await world.execute(
        "UPDATE yuxi.agent_run_requests SET queue_policy = 'steer' WHERE request_id = %s",
        one.request_id,
    )
    with pytest.raises(errors.UniqueViolation, match="agent_run_requests_one_steer_key"):
        await world.execute(
            "UPDATE yuxi.agent_run_requests SET queue_policy = 'steer' WHERE request_id = %s",
            two.request_id,
        )


async def test_events_are_append_only(world: World) -> None:
    await _completed_run(world)
    with refused("append-only"):
        await world.execute("UPDATE yuxi.run_events SET payload = '{}'")


@pytest.mark.parametrize(
    "assignment",
    [
        "thread_id = gen_random_uuid()",
        "request_id = 'another'",
        "run_type = 'resume'",
        "uid = gen_random_uuid()",
        "created_by_run_id = run_id",
        'input_payload = \'{"model_spec": "other"}\'',
        "attempt_count = attempt_count - 1",
        "last_event_seq = last_event_seq - 1",
    ],
)
async def test_a_running_run_is_never_rewritten(world: World, assignment: str) -> None:
    """Each rewrite the guard refuses, on a run whose status does not change (a running
    run that has appended events)."""
    run_id, token = await _running_run(world)
    await _append_one(world, run_id, token)
    with refused("cannot be rewritten"):
        await world.execute(f"UPDATE yuxi.agent_runs SET {assignment} WHERE run_id = %s", run_id)


@pytest.mark.parametrize(
    "assignment",
    ["output_message_id = NULL", "error_type = 'x'", "finished_at = now() - interval '1 day'"],
)
async def test_a_final_outcome_is_never_rewritten(world: World, assignment: str) -> None:
    run_id = await _completed_run(world)
    with refused("outcome is final"):
        await world.execute(f"UPDATE yuxi.agent_runs SET {assignment} WHERE run_id = %s", run_id)


async def test_a_stored_manifest_is_never_rewritten_even_by_hand(world: World) -> None:
    run_id, token = await _running_run(world)
    await world.value(
        "SELECT yuxi.run_write_manifest(%s, %s, '{\"v\": 2}'::jsonb, repeat('a', 64))",
        run_id,
        token,
    )
    for assignment in ("manifest = '{\"v\": 3}'", "manifest_fingerprint = repeat('b', 64)"):
        with pytest.raises(psycopg.Error) as caught:
            await world.execute(
                f"UPDATE yuxi.agent_runs SET {assignment} WHERE run_id = %s", run_id
            )
        assert caught.value.sqlstate == "YM001"
    # what the guard lets through still goes through: a renewal, an event
    await world.value("SELECT yuxi.run_renew_lease(%s, %s, 60)", run_id, token)
    await _append_one(world, run_id, token)
