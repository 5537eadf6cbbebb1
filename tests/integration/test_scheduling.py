"""Scheduled jobs: one occurrence per slot, skips, failures, coalescing, tickers racing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from psycopg import AsyncConnection

from tests.integration.conftest import World
from tests.integration.racing import failures, race
from tests.integration.worker_harness import completed, running_worker
from yuxi.queue.errors import NotFound
from yuxi.queue.runs import run_resume
from yuxi.scheduling.cron import CronError
from yuxi.scheduling.jobs import JobSettings, job_create, job_fire, job_get, job_occurrences
from yuxi.scheduling.ticker import tick, tick_until_idle

T0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)


def settings(world: World, **overrides: Any) -> JobSettings:
    values: dict[str, Any] = {
        "project_id": world.project,
        "agent_slug": "chatbot",
        "prompt": "daily report",
        "cron": "0 9 * * *",
        "timezone": "UTC",
    }
    values.update(overrides)
    return JobSettings(**values)


async def _job(world: World, created: datetime = T0, **overrides: Any) -> UUID:
    async with world.pool.connection() as conn:
        job = await job_create(conn, world.alice, settings(world, **overrides), now=created)
    return job.id


async def _tick(world: World, now: datetime) -> Any:
    async with world.pool.connection() as conn:
        return await tick_until_idle(conn, now=now)


async def test_a_due_job_fires_once_into_a_fresh_conversation(world: World) -> None:
    job_id = await _job(world)
    async with world.pool.connection() as conn:
        job = await job_get(conn, world.alice, job_id)
    assert job.next_fire_at == datetime(2026, 6, 1, 9, tzinfo=UTC)
    assert (await _tick(world, T0 + timedelta(minutes=30))).handled == 0  # not yet due
    result = await _tick(world, datetime(2026, 6, 1, 9, 0, 5, tzinfo=UTC))
    assert (result.fired, result.skipped, result.failed) == (1, 0, 0)
    async with world.pool.connection() as conn:
        [occurrence] = await job_occurrences(conn, world.alice, job_id)
        job = await job_get(conn, world.alice, job_id)
    assert (occurrence.trigger, occurrence.status, occurrence.scheduled_for) == (
        "schedule",
        "submitted",
        datetime(2026, 6, 1, 9, tzinfo=UTC),
    )
    assert occurrence.run_status == "pending"  # read from the run
    assert job.next_fire_at == datetime(2026, 6, 2, 9, tzinfo=UTC)
    conversation = await world.fetch(
        "SELECT c.project_id, c.agent_slug, c.uid, r.source, m.content"
        " FROM yuxi.conversations c JOIN yuxi.agent_run_requests r ON r.thread_id = c.thread_id"
        " JOIN yuxi.messages m ON m.id = r.input_message_id WHERE c.thread_id = %s",
        occurrence.thread_id,
    )
    assert conversation == [(world.project, "chatbot", world.alice, "schedule", "daily report")]
    # the same tick again finds nothing due
    assert (await _tick(world, datetime(2026, 6, 1, 9, 0, 6, tzinfo=UTC))).handled == 0


async def test_ten_missed_slots_fire_once(world: World) -> None:
    job_id = await _job(world, cron="*/5 * * * *")
    late = T0 + timedelta(minutes=51)  # slots 08:05 .. 08:50 were all missed
    assert (await _tick(world, late)).fired == 1
    async with world.pool.connection() as conn:
        assert len(await job_occurrences(conn, world.alice, job_id)) == 1
        job = await job_get(conn, world.alice, job_id)
    assert job.next_fire_at == T0 + timedelta(minutes=55)


async def test_a_job_still_running_is_skipped_and_run_now_too(world: World) -> None:
    job_id = await _job(world, cron="0 * * * *")
    await _tick(world, T0 + timedelta(hours=1))
    await _tick(world, T0 + timedelta(hours=2))  # the first run never ran: skipped
    async with world.pool.connection() as conn:
        manual = await job_fire(conn, job_id, trigger="manual", uid=world.alice)
        history = await job_occurrences(conn, world.alice, job_id)
    assert (manual.trigger, manual.status, manual.error) == (
        "manual",
        "skipped",
        "the previous occurrence is still running",
    )
    assert [o.status for o in history] == ["skipped", "skipped", "submitted"]  # newest first


async def test_run_now_fires_through_the_same_path(world: World) -> None:
    job_id = await _job(world)
    async with world.pool.connection() as conn:
        manual = await job_fire(conn, job_id, trigger="manual", uid=world.alice)
        job = await job_get(conn, world.alice, job_id)
    assert (manual.trigger, manual.status) == ("manual", "submitted")
    assert job.next_fire_at == datetime(2026, 6, 1, 9, tzinfo=UTC)  # the schedule is unchanged


async def test_domain_errors_fail_the_occurrence_and_the_batch_goes_on(world: World) -> None:
    hidden = await _job(world, agent_slug="private")
    gone = await _job(world, prompt="project will go")
    fine = await _job(world, prompt="still fine")
    await world.execute("DELETE FROM yuxi.agent_shares WHERE agent_slug = 'private'")
    await world.execute("UPDATE yuxi.projects SET deleted_at = now()")
    await world.execute(
        "INSERT INTO yuxi.projects (uid, name, workdir_path) VALUES (%s, 'p2', '/tmp/p2')",
        world.alice,
    )
    new_project = await world.value("SELECT id FROM yuxi.projects WHERE name = 'p2'")
    await world.execute(
        "UPDATE yuxi.scheduled_agent_jobs SET project_id = %s WHERE id IN (%s, %s)",
        new_project,
        fine,
        hidden,
    )
    result = await _tick(world, datetime(2026, 6, 1, 9, 1, tzinfo=UTC))
    assert (result.fired, result.failed) == (1, 2)
    async with world.pool.connection() as conn:
        statuses = {
            job: [(o.status, o.error) for o in await job_occurrences(conn, world.alice, job)]
            for job in (hidden, gone, fine)
        }
    assert statuses[hidden] == [("failed", "agent private not found")]
    assert statuses[gone][0][0] == "failed" and "project" in str(statuses[gone][0][1])
    assert statuses[fine][0][0] == "submitted"
    async with world.pool.connection() as conn:
        with pytest.raises(NotFound):  # run-now re-validates: the API says 404
            await job_fire(conn, gone, trigger="manual", uid=world.alice)


async def test_four_racing_tickers_fire_each_of_a_thousand_jobs_once(world: World) -> None:
    await world.execute(
        "INSERT INTO yuxi.scheduled_agent_jobs"
        " (uid, project_id, agent_slug, prompt, cron, timezone, next_fire_at)"
        " SELECT %s, %s, 'chatbot', 'job ' || i, '0 9 * * *', 'UTC', %s"
        " FROM generate_series(1, 1000) i",
        world.alice,
        world.project,
        datetime(2026, 6, 1, 9, tzinfo=UTC),
    )
    now = datetime(2026, 6, 1, 9, 0, 30, tzinfo=UTC)

    async def ticker(conn: AsyncConnection[Any], i: int) -> Any:
        return await tick_until_idle(conn, now=now, batch=50)

    results = await race(world.url, 4, ticker)
    assert failures(results) == []
    assert sum(r.fired for r in results) == 1000
    assert all(r.fired > 0 for r in results)  # the work was shared
    counts = await world.fetch(
        "SELECT count(*), count(DISTINCT (job_id, scheduled_for)),"
        " (SELECT count(*) FROM yuxi.agent_run_requests WHERE source = 'schedule')"
        " FROM yuxi.scheduled_job_occurrences"
    )
    assert counts == [(1000, 1000, 1000)]
    assert (
        await world.value(
            "SELECT count(*) FROM yuxi.scheduled_agent_jobs WHERE next_fire_at <> %s",
            datetime(2026, 6, 2, 9, tzinfo=UTC),
        )
        == 0
    )


async def test_disabled_and_deleted_jobs_do_not_fire(world: World) -> None:
    disabled = await _job(world, enabled=False)
    deleted = await _job(world)
    await world.execute("SELECT yuxi.job_delete(%s, %s)", world.alice, deleted)
    assert (await _tick(world, datetime(2026, 6, 3, tzinfo=UTC))).handled == 0
    assert (
        await world.value(
            "SELECT count(*) FROM yuxi.scheduled_job_occurrences WHERE job_id IN (%s, %s)",
            disabled,
            deleted,
        )
        == 0
    )


async def test_jobs_belong_to_their_owner(world: World) -> None:
    job_id = await _job(world)
    async with world.pool.connection() as conn:
        with pytest.raises(NotFound):
            await job_get(conn, world.bob, job_id)
        with pytest.raises(NotFound):
            await job_fire(conn, job_id, trigger="manual", uid=world.bob)
        with pytest.raises(NotFound):
            await job_occurrences(conn, world.bob, job_id)
        with pytest.raises(NotFound):  # bob cannot schedule into alice's project
            await job_create(conn, world.bob, settings(world))
        with pytest.raises(CronError):
            await job_create(conn, world.alice, settings(world, cron="0 9 * *"))
        with pytest.raises(CronError):
            await job_create(conn, world.alice, settings(world, timezone="Nowhere/City"))


async def test_deleting_a_user_removes_their_jobs_and_occurrences(world: World) -> None:
    job_id = await _job(world)
    await _tick(world, datetime(2026, 6, 1, 9, 1, tzinfo=UTC))
    await world.execute("SELECT yuxi.user_delete(%s)", world.alice)
    assert await world.fetch(
        "SELECT (SELECT count(*) FROM yuxi.scheduled_agent_jobs WHERE id = %s),"
        " (SELECT count(*) FROM yuxi.scheduled_job_occurrences WHERE job_id = %s),"
        " (SELECT count(*) FROM yuxi.api_tokens WHERE revoked_at IS NULL AND user_id = %s)",
        job_id,
        job_id,
        world.alice,
    ) == [(0, 0, 0)]


async def test_a_job_due_now_completes_through_a_real_worker(
    world: World, db_url: str, tmp_path: Any
) -> None:
    now = datetime.now(UTC)
    job_id = await _job(world, created=now - timedelta(minutes=2), cron="* * * * *")
    async with running_worker(db_url, tmp_path):
        async with world.pool.connection() as conn:
            result = await tick(conn)  # the worker ticks too; either one fires it
        async with world.pool.connection() as conn:
            history = await job_occurrences(conn, world.alice, job_id)
        assert result.fired + len(history) >= 1
        await completed(world, history[-1].run_id)
    reply = await world.value(
        "SELECT m.content FROM yuxi.messages m WHERE m.thread_id = %s AND m.role = 'assistant'",
        history[-1].thread_id,
    )
    assert reply == "echo: daily report"


@pytest.mark.parametrize(("cron", "zone"), [("not a cron", "UTC"), ("0 9 * * *", "Gone/Zone")])
async def test_a_job_broken_by_hand_is_disabled_and_does_not_block_others(
    world: World, cron: str, zone: str
) -> None:
    broken = await _job(world)
    fine = await _job(world, prompt="fine")
    await world.execute(
        "UPDATE yuxi.scheduled_agent_jobs SET cron = %s, timezone = %s WHERE id = %s",
        cron,
        zone,
        broken,
    )
    result = await _tick(world, datetime(2026, 6, 1, 9, 1, tzinfo=UTC))
    assert (result.fired, result.failed) == (1, 1)
    row = await world.fetch(
        "SELECT j.enabled, o.status, o.error FROM yuxi.scheduled_agent_jobs j"
        " JOIN yuxi.scheduled_job_occurrences o ON o.job_id = j.id WHERE j.id = %s",
        broken,
    )
    assert row[0][:2] == (False, "failed") and "disabled" in row[0][2]
    assert (
        await world.value(
            "SELECT status FROM yuxi.scheduled_job_occurrences WHERE job_id = %s", fine
        )
        == "submitted"
    )


async def test_an_answered_question_no_longer_blocks_the_job(world: World) -> None:
    job_id = await _job(world, prompt="/ask Proceed?")
    async with world.pool.connection() as conn:
        first = await job_fire(conn, job_id, trigger="manual", uid=world.alice)
    assert first.run_id is not None
    await world.finish(await world.claim(first.run_id), "interrupted")
    async with world.pool.connection() as conn:
        assert (
            await job_fire(conn, job_id, trigger="manual", uid=world.alice)
        ).status == "skipped"  # waiting for the user
        resumed = await run_resume(conn, first.run_id, resume="yes", uid=world.alice)
    assert resumed.run_id is not None
    await world.complete(await world.claim(resumed.run_id))
    async with world.pool.connection() as conn:
        assert (
            await job_fire(conn, job_id, trigger="manual", uid=world.alice)
        ).status == "submitted"


async def test_a_slot_retried_after_an_error_keeps_one_identity(world: World) -> None:
    job_id = await _job(world)
    await world.execute(
        "CREATE FUNCTION public.refuse_conversations() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'disk on fire'; END $$"
    )
    await world.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON yuxi.conversations"
        " FOR EACH ROW EXECUTE FUNCTION public.refuse_conversations()"
    )
    due = datetime(2026, 6, 1, 9, 1, tzinfo=UTC)
    assert (await _tick(world, due)).retry == 1
    [retry] = await world.fetch("SELECT id, status, error FROM yuxi.scheduled_job_occurrences")
    assert retry[1] == "pending_retry" and "disk on fire" in retry[2]
    await world.execute("DROP TRIGGER refuse ON yuxi.conversations")
    assert (await _tick(world, due)).fired == 1
    rows = await world.fetch("SELECT id, status, request_id FROM yuxi.scheduled_job_occurrences")
    assert rows == [(retry[0], "submitted", f"sched-{retry[0]}")]
    assert job_id is not None
