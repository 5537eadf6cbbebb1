"""Claims, leases, the manifest, release and the expired-lease reconciler."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest
from psycopg import AsyncConnection

from tests.integration.conftest import World
from tests.integration.racing import failures, race, successes
from yuxi.queue.errors import InvalidInput, LeaseLost, ManifestConflict, RunNotClaimable
from yuxi.queue.events import RunEvent, run_append_batch, run_append_events
from yuxi.queue.maintenance import run_reconcile_expired
from yuxi.queue.runs import (
    ManifestCommit,
    OutputMessage,
    run_claim,
    run_commit_manifest,
    run_finish,
    run_release,
    run_renew_lease,
    run_retry,
    run_write_manifest,
)
from yuxi.queue.threads import thread_continue, thread_queue

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FINGERPRINT_A = "a" * 64
FINGERPRINT_B = "b" * 64


async def _pending_run(world: World, thread: UUID | None = None) -> UUID:
    info = await world.submit(thread or await world.thread(), "work")
    assert info.run_id is not None
    return info.run_id


async def test_concurrent_claims_exactly_one_wins(world: World) -> None:
    run_id = await _pending_run(world)

    async def claim(conn: AsyncConnection[Any], i: int) -> Any:
        return await run_claim(conn, run_id, worker=f"w{i}", lease_seconds=30)

    results = await race(world.url, 30, claim)
    won = successes(results)
    assert len(won) == 1
    assert won[0].attempt_no == 1
    assert all(isinstance(e, RunNotClaimable) for e in failures(results))
    assert await world.value("SELECT count(*) FROM yuxi.agent_run_attempts") == 1


async def test_release_opens_a_second_attempt_keeping_started_at(world: World) -> None:
    run_id = await _pending_run(world)
    first = await world.claim(run_id, now=T0)
    async with world.pool.connection() as conn:
        released = await run_release(
            conn, run_id, first.lease_token, reason="shutdown", now=T0 + timedelta(seconds=5)
        )
    assert released.status == "pending"
    second = await world.claim(run_id, worker="w2", now=T0 + timedelta(seconds=9))
    assert second.attempt_no == 2
    assert second.started_at == first.started_at == T0
    attempts = await world.fetch(
        "SELECT attempt_no, worker, outcome FROM yuxi.agent_run_attempts ORDER BY attempt_no"
    )
    assert attempts == [(1, "w1", "released"), (2, "w2", None)]
    # a release re-delivers: the old job was taken, a new one waits
    assert (
        await world.value(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo' AND queueing_lock = %s",
            f"run:{run_id}",
        )
        == 1
    )  # nothing consumed the first delivery here, so it is reused
    # the attempt that ended is final, even for a raw UPDATE
    with pytest.raises(psycopg.Error, match="is final"):
        await world.execute(
            "UPDATE yuxi.agent_run_attempts SET outcome = 'failed' WHERE attempt_no = 1"
        )


async def test_stale_and_expired_owners_are_locked_out(world: World) -> None:
    run_id = await _pending_run(world)
    stale = await world.claim(run_id, now=T0, lease=10)
    async with world.pool.connection() as conn:
        await run_release(conn, run_id, stale.lease_token, now=T0 + timedelta(seconds=1))
    current = await world.claim(run_id, worker="w2", now=T0 + timedelta(seconds=2), lease=10)
    later = T0 + timedelta(seconds=3)
    expired = T0 + timedelta(seconds=13)

    for token, when in (
        (stale.lease_token, later),
        (current.lease_token, expired),
        (uuid4(), later),
    ):
        async with world.pool.connection() as conn:
            with pytest.raises(LeaseLost):
                await run_renew_lease(conn, run_id, token, lease_seconds=10, now=when)
            with pytest.raises(LeaseLost):
                await run_append_events(conn, run_id, token, [RunEvent("metadata")], now=when)
            with pytest.raises(LeaseLost):
                await run_write_manifest(
                    conn, run_id, token, manifest={}, fingerprint=FINGERPRINT_A, now=when
                )
            with pytest.raises(LeaseLost):
                await run_finish(
                    conn,
                    run_id,
                    token,
                    status="completed",
                    messages=[OutputMessage("assistant", "x")],
                    now=when,
                )
            with pytest.raises(LeaseLost):
                await run_release(conn, run_id, token, now=when)
    # the rightful holder, in time, still can, but not with a nonsensical lease
    async with world.pool.connection() as conn:
        with pytest.raises(InvalidInput):
            await run_renew_lease(conn, run_id, current.lease_token, lease_seconds=-5, now=later)
    async with world.pool.connection() as conn:
        state = await run_renew_lease(
            conn, run_id, current.lease_token, lease_seconds=10, now=later
        )
    assert state.status == "running"
    assert state.lease_expires_at == later + timedelta(seconds=10)
    assert await world.value("SELECT count(*) FROM yuxi.run_events") == 0


async def test_manifest_is_write_once(world: World) -> None:
    run_id = await _pending_run(world)
    claimed = await world.claim(run_id)
    async with world.pool.connection() as conn:
        stored = await run_write_manifest(
            conn, run_id, claimed.lease_token, manifest={"v": 2, "x": 1}, fingerprint=FINGERPRINT_A
        )
        assert stored == FINGERPRINT_A
        # same fingerprint again (a retry that derived the same manifest) is accepted
        await run_write_manifest(
            conn, run_id, claimed.lease_token, manifest={"v": 2, "x": 1}, fingerprint=FINGERPRINT_A
        )
        with pytest.raises(ManifestConflict):
            await run_write_manifest(
                conn,
                run_id,
                claimed.lease_token,
                manifest={"v": 2, "x": 2},
                fingerprint=FINGERPRINT_B,
            )
    assert await world.fetch("SELECT manifest, manifest_fingerprint FROM yuxi.agent_runs") == [
        ({"v": 2, "x": 1}, FINGERPRINT_A)
    ]
    with pytest.raises(psycopg.Error, match="write-once"):
        await world.execute("UPDATE yuxi.agent_runs SET manifest_fingerprint = %s", FINGERPRINT_B)


async def _commit_metadata(
    conn: AsyncConnection[Any], run_id: UUID, token: UUID, backend: str, events: list[RunEvent]
) -> ManifestCommit:
    """The worker's manifest commit with the attempt's first events (batch 1)."""
    return await run_commit_manifest(
        conn,
        run_id,
        token,
        manifest={"v": 1},
        fingerprint=FINGERPRINT_A,
        backend_id=backend,
        events=events,
        batch=1,
    )


async def test_the_manifests_commit_stores_the_attempts_first_events_once(world: World) -> None:
    """The metadata event is appended by the manifest's own transaction, as the attempt's
    batch 1: a re-sent commit (a lost reply) stores it once, a later batch follows it,
    and a changed identity (here: the backend) stores nothing."""
    run_id = await _pending_run(world)
    claimed = await world.claim(run_id)
    backend = await world.value("SELECT backend_id FROM yuxi.agents WHERE slug = 'chatbot'")
    metadata = [RunEvent("metadata", {"model": "builtin:scripted"})]
    async with world.pool.connection() as conn:
        for _ in range(2):  # the second is a re-send: the batch is stored already
            current = await _commit_metadata(conn, run_id, claimed.lease_token, backend, metadata)
            assert (current.fingerprint, current.identity_error) == (FINGERPRINT_A, None)
            assert current.last_event_seq == 1
        # nothing was announced by it: the worker does (yuxi/runtime/events.py)
        last = await run_append_batch(
            conn, run_id, claimed.lease_token, 2, [RunEvent("messages", {"chunks": []})]
        )
    assert last == 2
    assert await world.fetch(
        "SELECT seq, event, payload FROM yuxi.run_events WHERE run_id = %s ORDER BY seq", run_id
    ) == [(1, "metadata", {"model": "builtin:scripted"}), (2, "messages", {"chunks": []})]

    other = await _pending_run(world)
    claimed = await world.claim(other)
    async with world.pool.connection() as conn:
        current = await _commit_metadata(
            conn, other, claimed.lease_token, "another-backend", metadata
        )
    assert current.backend_id == backend and current.last_event_seq == 0
    assert await world.value("SELECT count(*) FROM yuxi.run_events WHERE run_id = %s", other) == 0


async def test_the_manifests_commit_does_not_wait_for_its_conversation(world: World) -> None:
    """A cancel locks the conversation, then the run (the global order). The manifest's
    commit, which locks the run, must not then need the conversation (a second update of
    its own row would check the row's foreign keys again): it completes while another
    session holds the conversation, instead of deadlocking with that cancel."""
    thread = await world.thread()
    run_id = await _pending_run(world, thread)
    claimed = await world.claim(run_id)
    backend = await world.value("SELECT backend_id FROM yuxi.agents WHERE slug = 'chatbot'")
    async with await psycopg.AsyncConnection.connect(world.url) as holder:
        await holder.execute(
            "SELECT 1 FROM yuxi.conversations WHERE thread_id = %s FOR UPDATE", (thread,)
        )
        async with await psycopg.AsyncConnection.connect(world.url, autocommit=True) as conn:
            await conn.execute("SET lock_timeout = '2s'")
            current = await _commit_metadata(
                conn, run_id, claimed.lease_token, backend, [RunEvent("metadata", {})]
            )
        await holder.rollback()
    assert current.last_event_seq == 1


async def test_concurrent_reconcilers_fail_an_expired_run_once(world: World) -> None:
    thread = await world.thread()
    run_id = await _pending_run(world, thread)
    backlog = await world.submit(thread, "next")
    await world.claim(run_id, worker="dead", now=T0, lease=10)
    after = T0 + timedelta(seconds=11)

    async def reconcile(conn: AsyncConnection[Any], i: int) -> Any:
        return await run_reconcile_expired(conn, now=after, infra_limit=0)

    results = await race(world.url, 8, reconcile)
    assert failures(results) == []
    handled = [run for batch in results for run in batch]
    assert [(r.run_id, r.status) for r in handled] == [(run_id, "failed")]
    row = await world.fetch(
        "SELECT r.status, r.error_type, m.delivery_status, a.outcome FROM yuxi.agent_runs r"
        " JOIN yuxi.messages m ON m.id = r.input_message_id"
        " JOIN yuxi.agent_run_attempts a ON a.run_id = r.run_id WHERE r.run_id = %s",
        run_id,
    )
    assert row == [("failed", "worker_lease_expired", "failed", "lease_expired")]
    assert (
        await world.value(
            "SELECT count(*) FROM yuxi.run_events WHERE run_id = %s AND event = 'end'", run_id
        )
        == 1
    )
    async with world.pool.connection() as conn:
        queue = await thread_queue(conn, thread)
        assert queue is not None
        assert (queue.status, queue.paused_reason, queue.blocking_run_id, queue.can_continue) == (
            "paused",
            "run_failed",
            run_id,
            True,
        )
        dispatched = await thread_continue(conn, thread, uid=world.alice)
    assert dispatched is not None
    assert (
        await world.value(
            "SELECT dispatched_run_id FROM yuxi.agent_run_requests WHERE request_id = %s",
            backlog.request_id,
        )
        == dispatched
    )


async def test_unexpired_leases_are_left_alone(world: World) -> None:
    run_id = await _pending_run(world)
    await world.claim(run_id, now=T0, lease=10)
    async with world.pool.connection() as conn:
        assert await run_reconcile_expired(conn, now=T0 + timedelta(seconds=9)) == []
    assert await world.value("SELECT status FROM yuxi.agent_runs") == "running"


async def test_a_lost_lease_is_retried_within_the_infrastructure_limit_not_the_agents_budget(
    world: World,
) -> None:
    run_id = await _pending_run(world)  # its agent's max_run_attempts is 1
    await world.claim(run_id, now=T0, lease=10)
    async with world.pool.connection() as conn:
        first = await run_reconcile_expired(conn, now=T0 + timedelta(seconds=11), infra_limit=1)
    assert [(r.run_id, r.status) for r in first] == [(run_id, "pending")]
    # the first retry is delivered at once
    assert (
        await world.value(
            "SELECT scheduled_at FROM procrastinate_jobs"
            " WHERE status = 'todo' AND queueing_lock = %s",
            f"run:{run_id}",
        )
        is None
    )
    second_claim = await world.claim(run_id, now=T0 + timedelta(seconds=12), lease=10)
    assert second_claim.attempt_no == 2
    async with world.pool.connection() as conn:
        second = await run_reconcile_expired(conn, now=T0 + timedelta(seconds=30), infra_limit=1)
    assert [(r.run_id, r.status) for r in second] == [(run_id, "failed")]
    [(error_type, message, attempts, infra)] = await world.fetch(
        "SELECT error_type, error_message, attempt_count, infra_retries FROM yuxi.agent_runs"
        " WHERE run_id = %s",
        run_id,
    )
    assert (error_type, attempts, infra) == ("worker_lease_expired", 2, 1)
    assert message.startswith("the worker w1 stopped renewing its lease (expired ")
    assert message.endswith("; no infrastructure retry left (1 used)")


async def test_events_are_gap_free_under_concurrent_appends(world: World) -> None:
    run_id = await _pending_run(world)
    claimed = await world.claim(run_id)

    async def append(conn: AsyncConnection[Any], i: int) -> Any:
        events = [RunEvent("messages", {"i": i, "k": k}) for k in range(3)]
        return await run_append_events(conn, run_id, claimed.lease_token, events)

    results = await race(world.url, 20, append)
    assert failures(results) == []
    assert sorted(results) == [3 * (i + 1) for i in range(20)]  # type: ignore[type-var]
    await world.complete(claimed)
    seqs = await world.fetch("SELECT seq, event FROM yuxi.run_events ORDER BY seq")
    assert [s for s, _ in seqs] == list(range(1, 62))
    assert [e for _, e in seqs].count("end") == 1
    assert seqs[-1][1] == "end"
    async with world.pool.connection() as conn:
        with pytest.raises(InvalidInput, match="end event"):
            await run_append_events(conn, run_id, claimed.lease_token, [RunEvent("end")])


async def _counters(world: World) -> dict[str, int]:
    return dict(await world.fetch("SELECT name, value FROM yuxi.maintenance_counters"))


async def test_the_reconciler_counts_expired_and_released_leases(world: World) -> None:
    assert await _counters(world) == dict.fromkeys(
        (
            "lease_expired",
            "lease_released",
            "redelivered_missing",
            "redelivered_stalled",
            "released_after_error",
            "delivery_pruned",
            "released_after_agent_error",
        ),
        0,
    )
    runs = [await _pending_run(world) for _ in range(3)]
    for run_id in runs:
        await world.claim(run_id, now=T0, lease=10)
    async with world.pool.connection() as conn:
        handled = await run_reconcile_expired(conn, now=T0 + timedelta(seconds=11), infra_limit=1)
    assert {r.status for r in handled} == {"pending"}
    counts = await _counters(world)
    assert (counts["lease_expired"], counts["lease_released"]) == (3, 3)
    await world.claim(runs[0], now=T0 + timedelta(seconds=12), lease=10)
    async with world.pool.connection() as conn:
        await run_reconcile_expired(conn, now=T0 + timedelta(seconds=30), infra_limit=1)
    counts = await _counters(world)
    assert (counts["lease_expired"], counts["lease_released"]) == (4, 3)


async def test_a_release_is_an_infrastructure_retry_until_the_limit_is_spent(world: World) -> None:
    """A worker shutting down gives its run back (counted in infra_retries, after the
    back-off: none after the first attempt, 1 s after the second); once the limit is
    spent the run fails with worker_shutdown, an error event and its end."""
    run_id = await _pending_run(world)
    first = await world.claim(run_id)
    async with world.pool.connection() as conn:
        released = await run_release(
            conn, run_id, first.lease_token, reason="worker shutting down", infra_limit=1
        )
    assert (released.status, released.infra_retries, released.attempt_count) == ("pending", 1, 1)
    second = await world.claim(run_id)
    async with world.pool.connection() as conn:
        failed = await run_release(
            conn, run_id, second.lease_token, reason="worker shutting down", infra_limit=1
        )
    spent = "worker shutting down; no infrastructure retry left (1 used)"
    assert (failed.status, failed.error_type, failed.error_message) == (
        "failed",
        "worker_shutdown",
        spent,
    )
    events = await world.fetch(
        "SELECT event, payload FROM yuxi.run_events WHERE run_id = %s ORDER BY seq", run_id
    )
    assert events[-2] == ("error", {"error_type": "worker_shutdown", "message": spent})
    assert events[-1][0] == "end"
    assert await world.fetch(
        "SELECT outcome, detail FROM yuxi.agent_run_attempts WHERE run_id = %s ORDER BY attempt_no",
        run_id,
    ) == [("released", "worker shutting down"), ("failed", None)]


async def test_the_retry_back_off_grows_with_the_attempts(world: World) -> None:
    delays = [
        await world.value("SELECT extract(epoch FROM yuxi.run_retry_delay(%s))", n)
        for n in (0, 1, 2, 3, 4, 7, 8, 50)
    ]
    assert [float(d) for d in delays] == [0, 0, 1, 2, 4, 30, 30, 30]


async def test_a_batch_sent_again_is_stored_once(world: World) -> None:
    run_id = await _pending_run(world)
    claimed = await world.claim(run_id)
    token = claimed.lease_token
    first = [RunEvent("metadata", {"attempt": 1}), RunEvent("messages", {"k": 1})]
    async with world.pool.connection() as conn:
        assert await run_append_batch(conn, run_id, token, 1, first) == 2
        # the reply to the first append was lost: the worker sends it again
        assert await run_append_batch(conn, run_id, token, 1, first) == 2
        assert await run_append_batch(conn, run_id, token, 2, [RunEvent("tool", {})]) == 3
        assert await run_append_batch(conn, run_id, token, 1, first) == 3  # an older one
        assert await run_append_events(conn, run_id, token, [RunEvent("tool", {})]) == 4
        with pytest.raises(InvalidInput, match="start at 1"):
            await run_append_batch(conn, run_id, token, 0, first)
        await run_release(conn, run_id, token, reason="shutdown")
    # a new attempt numbers its batches from 1 again
    second = await world.claim(run_id)
    async with world.pool.connection() as conn:
        assert await run_append_batch(conn, run_id, second.lease_token, 1, first) == 6
        with pytest.raises(LeaseLost):
            await run_append_batch(conn, run_id, token, 2, first)
    assert [e for (e,) in await world.fetch("SELECT event FROM yuxi.run_events ORDER BY seq")] == [
        "metadata",
        "messages",
        "tool",
        "tool",
        "metadata",
        "messages",
    ]


async def test_racing_resends_of_one_batch_store_it_once(world: World) -> None:
    run_id = await _pending_run(world)
    claimed = await world.claim(run_id)
    batch = [RunEvent("messages", {"k": k}) for k in range(3)]

    async def send(conn: AsyncConnection[Any], i: int) -> Any:
        return await run_append_batch(conn, run_id, claimed.lease_token, 1, batch)

    results = await race(world.url, 10, send)
    assert failures(results) == []
    assert set(results) == {3}
    assert await world.value("SELECT count(*) FROM yuxi.run_events") == 3


async def test_retry_gives_a_run_cut_by_an_outage_another_attempt_within_the_infra_limit(
    world: World,
) -> None:
    thread = await world.thread()  # its agent's max_run_attempts is 1
    run_id = await _pending_run(world, thread)
    first = await world.claim(run_id)
    async with world.pool.connection() as conn:
        with pytest.raises(InvalidInput):
            await run_retry(
                conn, run_id, first.lease_token, error_type="Bad Type", error_message=""
            )
        retried = await run_retry(
            conn,
            run_id,
            first.lease_token,
            error_type="database_unavailable",
            error_message="x",
            infra_limit=1,
        )
    assert (retried.status, retried.infra_retries) == ("pending", 1)
    assert (
        await world.value(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo' AND queueing_lock = %s",
            f"run:{run_id}",
        )
        == 1
    )
    second = await world.claim(run_id)
    async with world.pool.connection() as conn:
        with pytest.raises(LeaseLost):
            await run_retry(
                conn,
                run_id,
                first.lease_token,
                error_type="database_unavailable",
                error_message="x",
            )
        failed = await run_retry(
            conn,
            run_id,
            second.lease_token,
            error_type="database_unavailable",
            error_message="the worker lost its connection to the database (AdminShutdown)",
            infra_limit=1,
        )
    assert (failed.status, failed.error_type) == ("failed", "database_unavailable")
    spent = (
        "the worker lost its connection to the database (AdminShutdown);"
        " no infrastructure retry left (1 used)"
    )
    assert await world.fetch(
        "SELECT outcome, detail FROM yuxi.agent_run_attempts WHERE run_id = %s ORDER BY attempt_no",
        run_id,
    ) == [("released", "database_unavailable: x"), ("failed", None)]
    events = await world.fetch(
        "SELECT event, payload FROM yuxi.run_events WHERE run_id = %s ORDER BY seq", run_id
    )
    assert events[-2:] == [
        (
            "error",
            {"error_type": "database_unavailable", "message": spent},
        ),
        (
            "end",
            {"status": "failed", "error_type": "database_unavailable", "error_message": spent},
        ),
    ]
    assert (await _counters(world))["released_after_error"] == 1


async def test_retry_of_a_run_whose_cancel_was_requested_cancels_it(world: World) -> None:
    await world.execute("UPDATE yuxi.agents SET max_run_attempts = 3 WHERE slug = 'chatbot'")
    run_id = await _pending_run(world)
    claimed = await world.claim(run_id)
    await world.execute("SELECT yuxi.run_request_cancel(%s)", run_id)
    async with world.pool.connection() as conn:
        run = await run_retry(
            conn, run_id, claimed.lease_token, error_type="database_unavailable", error_message="x"
        )
    assert (run.status, run.error_type) == ("cancelled", None)
