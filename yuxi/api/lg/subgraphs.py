"""``stream_subgraphs``: a subagent's run streamed inside its parent's stream, as
LangGraph streams a subgraph. A parent's ``task`` tool call starts a child run (yuxi's
subagent, yuxi.runtime.child_runs); once the parent's stream has sent that call, each
child it started is followed to its end and translated like the parent's events, its
parts named ``<mode>|tools:<child run id>``. They carry no SSE id (the parent's events
do): a client that reconnects during a subagent's run gets that run's parts again.
One level: a subagent's own subagents stream in their own runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any
from uuid import UUID

from yuxi.api.lg.events import Translator
from yuxi.api.run_stream import Ended, follow_run
from yuxi.api.state import AppState
from yuxi.queue.errors import NotFound
from yuxi.queue.events import run_stream_read
from yuxi.queue.lg import LgRun
from yuxi.queue.statuses import ACTIVE_RUN_STATUSES
from yuxi.queue.threads import thread_subagent_runs

SUBAGENT_TOOL = "task"
POLL_SECONDS = 0.05


def subagent_calls(event: str, payload: dict[str, Any]) -> list[str]:
    """The ids of the ``task`` calls an event makes (none for any other event)."""
    if event != "tool" or payload.get("type") != "call":
        return []
    return [str(c.get("id")) for c in payload.get("calls") or [] if c.get("name") == SUBAGENT_TOOL]


async def subagent_parts(
    app: AppState,
    uid: UUID,
    parent: LgRun,
    modes: list[str],
    calls: list[str],
    call_seq: int,
    streamed: set[UUID],
) -> AsyncIterator[bytes]:
    """The parts of the child runs the parent's ``calls`` start (made in its event
    ``call_seq``), each followed to its end; ``streamed``: children already sent. A
    call that starts no run (refused before it) is over once its result is in the
    parent's events, or the parent has ended."""
    assert parent.run_id is not None
    started = 0
    answered: set[str] = set()
    while started < len(calls) and not set(calls) <= answered and not app.hub.closing:
        async with app.pool.connection() as conn:
            children = [
                c
                for c in await thread_subagent_runs(conn, uid, parent.thread_id)
                if c.created_by_run_id == parent.run_id and c.run_id not in streamed
            ]
            rows = [] if children else await run_stream_read(conn, parent.run_id, call_seq, 200)
        for child in children:
            streamed.add(child.run_id)
            started += 1
            async for part in _child(app, parent, child.run_id, modes):
                yield part
        if children:
            continue
        answered.update(
            str(json.loads(row.payload).get("tool_call_id"))
            for row in rows
            if row.event == "tool" and row.payload is not None
        )
        if not rows or rows[0].run_status not in ACTIVE_RUN_STATUSES:
            return
        await asyncio.sleep(POLL_SECONDS)


async def _child(
    app: AppState, parent: LgRun, child: UUID, modes: list[str]
) -> AsyncIterator[bytes]:
    translator = Translator(
        modes, parent.request_id, str(parent.thread_id), [], namespace=f"tools:{child}"
    )
    followed = follow_run(app, child, app.hub.listen(child))
    try:
        async with aclosing(followed):
            async for item in followed:
                if isinstance(item, bytes):
                    yield item  # a heartbeat
                elif isinstance(item, Ended):
                    return
                else:
                    seq, event, payload = item
                    for part in translator.feed(seq, event, json.loads(payload)):
                        yield part
    except NotFound:
        return
