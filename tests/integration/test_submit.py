from __future__ import annotations

import pytest

from tests.integration.conftest import World
from yuxi.queue.errors import InvalidInput, NotFound, RequestIdConflict
from yuxi.queue.requests import request_get


async def test_submit_on_idle_thread_dispatches_at_once(world: World) -> None:
    thread = await world.thread()
    info = await world.submit(thread, "hi")
    assert info.status == "dispatched"
    assert info.run_id is not None
    assert info.queue_position is None
    rows = await world.fetch(
        "SELECT r.status, r.run_type, m.delivery_status, m.run_id, j.task_name, j.args->>'run_id'"
        " FROM yuxi.agent_runs r JOIN yuxi.messages m ON m.id = r.input_message_id"
        " JOIN procrastinate_jobs j ON j.id = r.delivery_job_id WHERE r.run_id = %s",
        info.run_id,
    )
    assert rows == [("pending", "chat", "dispatched", info.run_id, "execute_run", str(info.run_id))]


async def test_model_resolution_order(world: World) -> None:
    thread = await world.thread()
    first = await world.submit(thread, "a")
    payload = await world.value(
        "SELECT input_payload FROM yuxi.agent_run_requests WHERE request_id = %s", first.request_id
    )
    assert payload == {"model_spec": "builtin:scripted", "tool_approval_mode": "auto"}
    await world.submit(thread, "b", model_spec="openai:gpt-x", tool_approval_mode="ask")
    third = await world.submit(thread, "c")
    payload = await world.value(
        "SELECT input_payload FROM yuxi.agent_run_requests WHERE request_id = %s", third.request_id
    )
    # the conversation saved the explicit choice; the approval mode is per request
    assert payload == {"model_spec": "openai:gpt-x", "tool_approval_mode": "auto"}


async def test_other_users_thread_is_not_found(world: World) -> None:
    thread = await world.thread()
    with pytest.raises(NotFound):
        await world.submit(thread, "x", uid=world.bob)
    assert await world.value("SELECT count(*) FROM yuxi.messages") == 0


async def test_resend_returns_the_first_request_unchanged(world: World) -> None:
    thread = await world.thread()
    first = await world.submit(thread, "original", request_id="req-1", model_spec="m:1")
    again = await world.submit(thread, "changed", request_id="req-1", model_spec="m:2")
    assert again == first
    assert await world.value("SELECT count(*) FROM yuxi.messages") == 1
    assert await world.value("SELECT content FROM yuxi.messages") == "original"


async def test_request_id_on_another_thread_conflicts(world: World) -> None:
    one, two = await world.thread(), await world.thread()
    await world.submit(one, "x", request_id="shared")
    with pytest.raises(RequestIdConflict):
        await world.submit(two, "y", request_id="shared")
    bobs = await world.thread(world.bob)
    with pytest.raises(RequestIdConflict):
        await world.submit(bobs, "y", request_id="shared", uid=world.bob)
    assert await world.value("SELECT count(*) FROM yuxi.messages") == 1


async def test_get_request_is_scoped_to_its_owner(world: World) -> None:
    thread = await world.thread()
    info = await world.submit(thread, "x", request_id="mine")
    async with world.pool.connection() as conn:
        assert (await request_get(conn, "mine", uid=world.alice)) == info
        with pytest.raises(NotFound):
            await request_get(conn, "mine", uid=world.bob)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"request_id": "has space"}, "request_id must be"),
        ({"request_id": "x" * 129}, "request_id must be"),
        ({"source": "cron"}, "source must be"),
        ({"queue_policy": "later"}, "queue_policy must be"),
        ({"tool_approval_mode": "sometimes"}, "tool_approval_mode must be"),
        ({"query": "   "}, "query must not be empty"),
    ],
)
async def test_bad_input_is_refused_with_a_typed_error(
    world: World, kwargs: dict[str, str], message: str
) -> None:
    thread = await world.thread()
    kwargs = {"query": "hello", **kwargs}
    with pytest.raises(InvalidInput, match=message):
        await world.submit(thread, **kwargs)
    assert await world.value("SELECT count(*) FROM yuxi.messages") == 0
