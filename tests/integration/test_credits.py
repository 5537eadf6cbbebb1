"""Budgets in SQL, raced over real connections: a run's claim freezes one call's
estimate, its end settles the hold exactly once (whoever ends it), a balance never goes
negative and always equals the sum of its ledger."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg import AsyncConnection

from tests.integration.conftest import World
from tests.integration.racing import failures, race, successes
from tests.integration.worker_harness import running_worker, wait_for_status
from yuxi.queue.credits import credit_add, credit_refreeze, credit_report
from yuxi.queue.errors import IllegalTransition, InsufficientCredits, InvalidInput, NotFound
from yuxi.queue.models import model_create
from yuxi.queue.runs import OutputMessage, run_claim_execution, run_finish

# 1 credit per token in and out; max_tokens 100 freezes 200 credits per model call
PRICED = {
    "spec": "builtin:scripted",
    "name": "Scripted, priced",
    "max_tokens": 100,
    "price_input_per_mtok": 1_000_000,
    "price_output_per_mtok": 1_000_000,
}
ESTIMATE = Decimal(200)
USAGE = [{"model": "builtin:scripted", "input_tokens": 30, "output_tokens": 5}]  # costs 35


async def _priced_model(world: World, **fields: Any) -> None:
    async with world.pool.connection() as conn:
        await model_create(conn, uuid.uuid4(), None, {**PRICED, **fields})


async def _pending_runs(world: World, count: int, uid: UUID | None = None) -> list[UUID]:
    runs = []
    for _ in range(count):
        request = await world.submit(await world.thread(uid), uid=uid or world.alice)
        assert request.run_id is not None
        runs.append(request.run_id)
    return runs


async def _balance(world: World, uid: UUID) -> Decimal:
    return Decimal(
        await world.value("SELECT balance FROM yuxi.credit_accounts WHERE uid = %s", uid)
    )


async def _ledger_sum(world: World, uid: UUID) -> Decimal:
    total = await world.value("SELECT sum(delta) FROM yuxi.credit_ledger WHERE uid = %s", uid)
    return Decimal(total or 0)


async def _claim(conn: AsyncConnection[Any], run_id: UUID) -> Any:
    """The executor's claim, as the few fields these tests read."""
    claim = await run_claim_execution(conn, run_id, worker="w", lease_seconds=30)
    return SimpleNamespace(
        run_id=claim.lease.run_id,
        lease_token=claim.lease.token,
        credit_hold=claim.credit.hold,
        credit_error=claim.credit.error,
    )


async def test_fifty_claims_against_a_balance_for_ten(world: World) -> None:
    await _priced_model(world)
    async with world.pool.connection() as conn:
        await credit_add(conn, world.alice, ESTIMATE * 10 + 150, reason="ten runs and change")
    runs = await _pending_runs(world, 50)

    claims = await race(world.url, 50, lambda conn, i: _claim(conn, runs[i]))
    assert failures(claims) == []
    held = [c for c in successes(claims) if c.credit_hold is not None]
    refused = [c for c in successes(claims) if c.credit_error is not None]
    assert len(held) == 10 and len(refused) == 40
    assert all(c.credit_hold == ESTIMATE and c.credit_error is None for c in held)
    assert all("insufficient credits" in c.credit_error for c in refused)
    assert await _balance(world, world.alice) == Decimal(150)
    assert await _ledger_sum(world, world.alice) == Decimal(150)
    assert await world.value("SELECT count(*) FROM yuxi.credit_holds WHERE status = 'held'") == 10

    # all end at once: the ten charged their cost, the forty (never frozen) nothing
    async def end(conn: AsyncConnection[Any], i: int) -> Any:
        claimed = successes(claims)[i]
        if claimed.credit_hold is not None:
            return await run_finish(
                conn,
                claimed.run_id,
                claimed.lease_token,
                status="completed",
                messages=[OutputMessage(role="assistant", content="done")],
                usage=USAGE,
            )
        return await run_finish(
            conn,
            claimed.run_id,
            claimed.lease_token,
            status="failed",
            error_type="insufficient_credits",
            error_message=claimed.credit_error,
        )

    assert failures(await race(world.url, 50, end)) == []
    assert await _balance(world, world.alice) == ESTIMATE * 10 + 150 - 35 * 10
    assert await _ledger_sum(world, world.alice) == await _balance(world, world.alice)
    holds = await world.fetch("SELECT status, amount, charged, unpaid FROM yuxi.credit_holds")
    assert holds == [("settled", ESTIMATE, Decimal(35), Decimal(0))] * 10
    kinds = await world.fetch(
        "SELECT kind, count(*) FROM yuxi.credit_ledger GROUP BY kind ORDER BY kind"
    )
    assert kinds == [("charge", 10), ("freeze", 10), ("release", 10), ("topup", 1)]
    assert await world.fetch("SELECT * FROM yuxi.credit_mismatches") == []


async def test_top_ups_and_freezes_race_without_losing_a_credit(world: World) -> None:
    await _priced_model(world)
    async with world.pool.connection() as conn:
        await credit_add(conn, world.alice, ESTIMATE * 5)
    runs = await _pending_runs(world, 20)

    async def act(conn: AsyncConnection[Any], i: int) -> Any:
        if i % 2:
            return await credit_add(conn, world.alice, ESTIMATE, reason=f"top-up {i}")
        return await _claim(conn, runs[i // 2])

    results = await race(world.url, 40, act)
    assert failures(results) == []
    held = await world.value("SELECT count(*) FROM yuxi.credit_holds WHERE status = 'held'")
    # 5 + 20 runs' worth arrived in all, 20 runs asked: every claim could be covered only
    # if its top-ups came first, so between 5 and 20 hold, and nothing is lost either way
    assert 5 <= held <= 20
    assert await _balance(world, world.alice) == ESTIMATE * (5 + 20 - held)
    assert await _ledger_sum(world, world.alice) == await _balance(world, world.alice)


async def test_a_balance_never_goes_negative_and_changes_only_by_the_ledger(
    world: World,
) -> None:
    async with world.pool.connection() as conn:
        assert await credit_add(conn, world.alice, Decimal("10.5")) == Decimal("10.5")
        with pytest.raises(InsufficientCredits):
            await credit_add(conn, world.alice, Decimal(-11))
        assert await credit_add(conn, world.alice, Decimal("-0.5")) == Decimal(10)
        for bad in (Decimal(0), Decimal("0.000000001")):
            with pytest.raises(InvalidInput):
                await credit_add(conn, world.alice, bad)
        with pytest.raises(NotFound):
            await credit_add(conn, uuid.uuid4(), Decimal(1))
        report = await credit_report(conn, world.alice)
        assert (
            report is not None
            and Decimal(report["balance"]) == 10
            and Decimal(report["frozen"]) == 0
        )
        assert [row["kind"] for row in report["ledger"]] == ["adjust", "topup"]
        assert await credit_report(conn, world.bob) is None

    # psql cannot move a balance or rewrite the ledger around the functions
    for statement in (
        "UPDATE yuxi.credit_accounts SET balance = 1000",
        "INSERT INTO yuxi.credit_accounts (uid, balance) VALUES ('{bob}', 5)",
        "UPDATE yuxi.credit_ledger SET delta = 1000",
        "DELETE FROM yuxi.credit_ledger",
    ):
        with pytest.raises(psycopg.Error) as raised:
            await world.execute(statement.format(bob=world.bob))
        assert raised.value.sqlstate == IllegalTransition.sqlstate, statement
    # a ledger row that would overdraw is refused by the balance's CHECK
    with pytest.raises(psycopg.errors.CheckViolation):
        await world.execute(
            "INSERT INTO yuxi.credit_ledger (uid, kind, delta) VALUES (%s, 'adjust', -11)",
            world.alice,
        )
    assert await _balance(world, world.alice) == Decimal(10)
    assert await _ledger_sum(world, world.alice) == Decimal(10)


async def test_a_hold_settles_exactly_once_whoever_ends_the_run(world: World) -> None:
    await _priced_model(world)
    async with world.pool.connection() as conn:
        await credit_add(conn, world.alice, Decimal(1000))
    expired, cancelled, failed = await _pending_runs(world, 3)
    async with world.pool.connection() as conn:
        await run_claim_execution(conn, expired, worker="w", lease_seconds=0.2)
        claimed_cancel = await _claim(conn, cancelled)
        claimed_fail = await _claim(conn, failed)
    assert await _balance(world, world.alice) == 1000 - 3 * ESTIMATE

    # the lease expires: reconcilers race to end it, one releases the hold
    later = await world.value("SELECT clock_timestamp() + interval '5 seconds'")
    results = await race(
        world.url,
        8,
        # no infrastructure retry: the run fails
        lambda conn, i: conn.execute(
            "SELECT * FROM yuxi.run_reconcile_expired(%s, p_infra_limit => 0)", (later,)
        ),
    )
    assert failures(results) == []
    assert await world.value("SELECT status FROM yuxi.agent_runs WHERE run_id = %s", expired) == (
        "failed"
    )
    # a cancel requested from psql, then the worker ends it with what it spent
    await world.execute("SELECT yuxi.run_request_cancel(%s)", cancelled)
    async with world.pool.connection() as conn:
        await run_finish(
            conn,
            cancelled,
            claimed_cancel.lease_token,
            status="cancelled",
            usage=[{"model": "builtin:scripted", "input_tokens": 10, "output_tokens": 0}],
        )
        await run_finish(
            conn, failed, claimed_fail.lease_token, status="failed", error_type="boom", usage=USAGE
        )
    holds = dict(
        (row[0], row[1:])
        for row in await world.fetch("SELECT run_id, status, charged FROM yuxi.credit_holds")
    )
    assert holds == {
        expired: ("released", Decimal(0)),
        cancelled: ("settled", Decimal(10)),
        failed: ("settled", Decimal(35)),
    }
    releases = await world.fetch(
        "SELECT run_id, count(*) FROM yuxi.credit_ledger WHERE kind = 'release' GROUP BY run_id"
    )
    assert sorted(n for _, n in releases) == [1, 1, 1]
    assert await _balance(world, world.alice) == Decimal(1000 - 10 - 35)
    assert await _ledger_sum(world, world.alice) == await _balance(world, world.alice)

    # a conversation purged with a held run gives the freeze back
    [purged] = await _pending_runs(world, 1)
    async with world.pool.connection() as conn:
        await _claim(conn, purged)
    await world.execute(
        "DELETE FROM yuxi.conversations WHERE thread_id ="
        " (SELECT thread_id FROM yuxi.agent_runs WHERE run_id = %s)",
        purged,
    )
    assert await _balance(world, world.alice) == Decimal(1000 - 10 - 35)
    assert await _ledger_sum(world, world.alice) == await _balance(world, world.alice)


async def test_a_refreeze_covers_the_next_call_or_refuses_it(world: World) -> None:
    await _priced_model(world)
    async with world.pool.connection() as conn:
        await credit_add(conn, world.alice, ESTIMATE * 2 + 50)
        [run_id] = await _pending_runs(world, 1)
        claimed = await _claim(conn, run_id)
        # after one call that cost 35: 35 + 200 is needed, 200 held, 35 more frozen
        assert await credit_refreeze(conn, run_id, claimed.lease_token, USAGE) == 235
        assert await _balance(world, world.alice) == ESTIMATE * 2 + 50 - 235
        spent = [{"model": "builtin:scripted", "input_tokens": 300, "output_tokens": 10}]
        with pytest.raises(InsufficientCredits):  # 310 + 200 needed, 450 in all
            await credit_refreeze(conn, run_id, claimed.lease_token, spent)
        assert await _balance(world, world.alice) == ESTIMATE * 2 + 50 - 235
        # the worker fails the run with what it spent: charged, the rest released
        await run_finish(
            conn,
            run_id,
            claimed.lease_token,
            status="failed",
            error_type="insufficient_credits",
            usage=spent,
        )
    assert await _balance(world, world.alice) == ESTIMATE * 2 + 50 - 310
    assert await _ledger_sum(world, world.alice) == await _balance(world, world.alice)


async def test_a_cost_beyond_the_balance_is_charged_down_to_zero(world: World) -> None:
    await _priced_model(world)
    async with world.pool.connection() as conn:
        await credit_add(conn, world.alice, ESTIMATE + 5)
        [run_id] = await _pending_runs(world, 1)
        claimed = await _claim(conn, run_id)
        huge = [{"model": "builtin:scripted", "input_tokens": 1000, "output_tokens": 0}]
        await run_finish(
            conn,
            run_id,
            claimed.lease_token,
            status="completed",
            messages=[OutputMessage(role="assistant", content="long")],
            usage=huge,
        )
    assert await _balance(world, world.alice) == 0
    assert await world.fetch("SELECT charged, unpaid FROM yuxi.credit_holds") == [
        (ESTIMATE + 5, Decimal(1000) - ESTIMATE - 5)
    ]


async def test_byok_free_and_unbudgeted_runs_freeze_nothing(world: World) -> None:
    async with world.pool.connection() as conn:
        await credit_add(conn, world.alice, Decimal(1))  # less than one call
        # alice's own model of the same spec shadows any platform one: BYOK
        await model_create(conn, uuid.uuid4(), None, PRICED)
        await model_create(
            conn, uuid.uuid4(), world.alice, {"spec": "builtin:scripted", "name": "Mine"}
        )
        [byok] = await _pending_runs(world, 1)
        claimed = await _claim(conn, byok)
        assert claimed.credit_hold is None and claimed.credit_error is None
        # bob has no budget: priced platform runs are never stopped
        [unbudgeted] = await _pending_runs(world, 1, world.bob)
        claimed = await _claim(conn, unbudgeted)
        assert claimed.credit_hold is None and claimed.credit_error is None
    assert await world.value("SELECT count(*) FROM yuxi.credit_holds") == 0
    assert await _balance(world, world.alice) == Decimal(1)


async def test_a_sigkilled_workers_hold_is_released_once_by_the_reconciler(
    world: World, db_url: str, tmp_path: Path
) -> None:
    await _priced_model(world)
    async with world.pool.connection() as conn:
        await credit_add(conn, world.alice, Decimal(1000))
    thread = await world.thread()
    info = await world.submit(thread, "/sleep 60")
    env = {
        **os.environ,
        "YUXI_DATABASE_URL": db_url,
        "YUXI_HOME": str(tmp_path / "doomed"),
        "YUXI_LEASE_SECONDS": "2",
        "YUXI_LEASE_RENEW_SECONDS": "0.5",
    }
    doomed = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "yuxi.cli",
        "worker",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await wait_for_status(world, info.run_id, {"running"}, within=30)
        assert await _balance(world, world.alice) == 1000 - ESTIMATE
        doomed.send_signal(signal.SIGKILL)
        await asyncio.wait_for(doomed.wait(), 10)
    finally:
        if doomed.returncode is None:
            doomed.kill()

    # two workers' reconcilers race for the expired lease
    # (no infrastructure retry: the run fails)
    async with (
        running_worker(db_url, tmp_path / "one", infra_retries=0),
        running_worker(db_url, tmp_path / "two", infra_retries=0),
    ):
        assert await wait_for_status(world, info.run_id, within=30) == "failed"
    assert await world.fetch(
        "SELECT status, charged FROM yuxi.credit_holds WHERE run_id = %s", info.run_id
    ) == [("released", Decimal(0))]
    assert await world.fetch(
        "SELECT kind, delta FROM yuxi.credit_ledger WHERE run_id = %s ORDER BY id", info.run_id
    ) == [("freeze", -ESTIMATE), ("release", ESTIMATE)]
    assert await _balance(world, world.alice) == Decimal(1000)
    assert await _ledger_sum(world, world.alice) == Decimal(1000)
