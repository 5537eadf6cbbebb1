"""The API's fan-out of run notifications to its SSE streams (no database needed)."""

from __future__ import annotations

import asyncio
import gc
import uuid
from collections.abc import AsyncIterator

import pytest

from yuxi.api.event_hub import EventHub, Subscription

pytestmark = pytest.mark.asyncio


async def test_a_subscription_hears_its_run_until_closed() -> None:
    hub = EventHub("postgresql://unused")
    run, other = uuid.uuid4(), uuid.uuid4()
    subscription = hub.listen(run)
    hub._wake(f"{other} 3")
    assert not subscription.event.is_set()
    hub._wake(f"{run} 4")
    assert subscription.event.is_set()
    assert hub.listeners == 1
    subscription.close()
    assert hub.listeners == 0
    hub._wake(f"{run} 5")  # nobody left to wake, and nothing kept for the run


async def test_a_stream_dropped_before_its_body_started_leaves_no_subscription() -> None:
    """A stream's handler subscribes before its first read; if the response body never
    starts (the client left), the generator is dropped unstarted and never closes it."""
    hub = EventHub("postgresql://unused")
    run = uuid.uuid4()

    async def body(subscription: Subscription) -> AsyncIterator[bytes]:
        try:
            await asyncio.sleep(0)
            yield b""
        finally:
            subscription.close()

    stream = body(hub.listen(run))
    assert hub.listeners == 1
    del stream
    gc.collect()
    assert hub.listeners == 0
    hub._wake(f"{run} 1")
    assert run not in hub._waiters


def carrying(run: uuid.UUID, last: int, *events: tuple[int, str, str]) -> str:
    return f"{run} {last}" + "".join(
        f"\n{seq}\t{event}\t{payload}" for seq, event, payload in events
    )


async def test_a_subscription_takes_the_events_that_follow_what_it_sent() -> None:
    hub = EventHub("postgresql://unused")
    run = uuid.uuid4()
    subscription = hub.listen(run)
    hub._wake(carrying(run, 2, (1, "messages", '{"a": 1}'), (2, "tool", '{"b": "x\\ty"}')))
    hub._wake(carrying(run, 3, (2, "tool", '{"b": "x\\ty"}'), (3, "end", "{}")))
    assert subscription.event.is_set()
    assert subscription.take(0) == [
        (1, "messages", '{"a": 1}'),
        (2, "tool", '{"b": "x\\ty"}'),
        (3, "end", "{}"),
    ]
    assert not subscription.event.is_set()
    assert subscription.take(3) == []  # nothing new


@pytest.mark.parametrize(
    ("payloads", "after", "taken"),
    [
        # a bare notification of events not sent yet: read them
        ([lambda r: f"{r} 4"], 3, None),
        # a bare notification of what was sent already: nothing to do
        ([lambda r: f"{r} 3"], 3, []),
        # the oldest events did not fit: a gap, read
        ([lambda r: carrying(r, 6, (6, "messages", "{}"))], 3, None),
        # carried events that stop before the notification's last seq
        ([lambda r: carrying(r, 6, (4, "messages", "{}"))], 3, None),
        # a notification sent by hand with the run id alone
        ([lambda r: f"{r}"], 3, None),
        # one this version cannot read
        ([lambda r: f"{r} 5\nfive\tmessages\t{{}}"], 3, None),
    ],
)
async def test_a_subscription_reads_unless_the_events_continue_what_it_sent(
    payloads: list, after: int, taken: list | None
) -> None:
    hub = EventHub("postgresql://unused")
    run = uuid.uuid4()
    subscription = hub.listen(run)
    for payload in payloads:
        hub._wake(payload(run))
    assert subscription.take(after) == taken
    assert not subscription.event.is_set()


async def test_a_subscription_reads_after_a_reconnect_or_too_many_notifications() -> None:
    hub = EventHub("postgresql://unused")
    run = uuid.uuid4()
    subscription = hub.listen(run)
    hub._wake(carrying(run, 1, (1, "messages", "{}")))
    hub._wake_all()  # the listener reconnected: notifications may have been missed
    assert subscription.take(0) is None
    for seq in range(1, 200):  # a stream too busy sending to take them
        hub._wake(carrying(run, seq, (seq, "messages", "{}")))
    assert subscription.take(0) is None
    hub._wake(carrying(run, 200, (200, "messages", "{}")))
    subscription.drop()  # a read covers what was held
    assert subscription.take(200) == []
