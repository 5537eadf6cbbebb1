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
