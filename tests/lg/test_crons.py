"""Crons are yuxi's scheduled jobs: created, searched and deleted through the SDK, fired
by yuxi's scheduler (its tick), each time on a new thread."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from langgraph_sdk.errors import BadRequestError, NotFoundError, UnprocessableEntityError

from tests.lg.conftest import Api, Clients
from yuxi.scheduling.ticker import tick

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_a_cron_fires_through_the_scheduler(sdk: Clients, api: Api, worker: None) -> None:
    cron = await sdk.alice.crons.create(
        "chatbot",
        schedule="*/5 * * * *",
        input={"messages": [{"role": "user", "content": "scheduled hello"}]},
    )
    assert cron["assistant_id"] == "chatbot" and cron["schedule"] == "*/5 * * * *"
    found = await sdk.alice.crons.search(assistant_id="chatbot")
    assert [c["cron_id"] for c in found] == [cron["cron_id"]]
    assert await sdk.bob.crons.search() == []

    due = datetime.fromisoformat(str(cron["next_run_date"])) + timedelta(seconds=1)
    async with api.pool.connection() as conn:
        fired = await tick(conn, now=due)
    assert fired.fired == 1
    threads = await sdk.alice.threads.search(metadata={"graph_id": "chatbot"}, limit=100)
    runs = []
    for thread in threads:
        runs += [(thread["thread_id"], r) for r in await sdk.alice.runs.list(thread["thread_id"])]
    scheduled = [(t, r) for t, r in runs if r["run_id"].startswith("sched-")]
    assert len(scheduled) == 1
    thread_id, run = scheduled[0]
    values = await sdk.alice.runs.join(thread_id, run["run_id"])
    assert values["messages"][-1]["content"] == "echo: scheduled hello"

    with pytest.raises(NotFoundError):
        await sdk.bob.crons.delete(cron["cron_id"])
    await sdk.alice.crons.delete(cron["cron_id"])
    assert await sdk.alice.crons.search() == []


async def test_thread_crons_and_bad_crons_are_refused(sdk: Clients) -> None:
    thread = await sdk.alice.threads.create()
    with pytest.raises(UnprocessableEntityError):
        await sdk.alice.crons.create_for_thread(
            thread["thread_id"], "chatbot", schedule="0 * * * *", input={"messages": ["x"]}
        )
    with pytest.raises(UnprocessableEntityError):
        await sdk.alice.crons.create(
            "chatbot", schedule="0 * * * *", input={"messages": ["x"]}, interrupt_before=["a"]
        )


async def test_cron_update_and_count(sdk: Clients) -> None:
    cron = await sdk.alice.crons.create(
        "chatbot", schedule="0 9 * * *", input={"messages": [{"role": "user", "content": "a"}]}
    )
    cid = cron["cron_id"]
    assert await sdk.alice.crons.count() == 1
    assert await sdk.alice.crons.count(assistant_id="chatbot") == 1
    assert await sdk.alice.crons.count(assistant_id="private") == 0
    assert await sdk.bob.crons.count() == 0
    changed = await sdk.alice.crons.update(
        cid,
        schedule="30 18 * * *",
        timezone="Europe/Paris",
        enabled=False,
        input={"messages": [{"role": "user", "content": "b"}]},
        context={"tool_approval_mode": "ask"},
    )
    assert changed["schedule"] == "30 18 * * *" and changed["timezone"] == "Europe/Paris"
    assert changed["enabled"] is False
    assert changed["payload"]["input"]["messages"][0]["content"] == "b"
    assert changed["payload"]["context"] == {"tool_approval_mode": "ask"}
    kept = await sdk.alice.crons.update(cid, enabled=True)
    assert kept["schedule"] == "30 18 * * *" and kept["enabled"] is True
    assert kept["payload"]["input"]["messages"][0]["content"] == "b"
    assert [c["schedule"] for c in await sdk.alice.crons.search()] == ["30 18 * * *"]
    with pytest.raises(NotFoundError):
        await sdk.bob.crons.update(cid, enabled=False)
    with pytest.raises(UnprocessableEntityError):
        await sdk.alice.crons.update(cid, interrupt_before=["model"])
    for bad in ({"schedule": "every day"}, {"timezone": "Mars/Olympus"}):
        with pytest.raises(BadRequestError):
            await sdk.alice.crons.update(cid, **bad)
    await sdk.alice.crons.delete(cid)
    assert await sdk.alice.crons.count() == 0
