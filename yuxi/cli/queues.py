"""``yuxi queue show``: what runs, what waits and what is paused, per conversation,
through ``yuxi.thread_queue_list`` and ``yuxi.thread_queue_requests``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

import click

from yuxi.cli.connect import JSON_HELP, cell, echo_json, echo_table, preview, when, with_database

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from yuxi.queue.threads import QueueRequest, ThreadQueueListing


@click.group()
def queue() -> None:
    """Conversation queues: what runs, what waits, what is paused."""


@queue.command("show")
@click.argument("thread_id", type=click.UUID, required=False)
@click.option(
    "--all",
    "include_finished",
    is_flag=True,
    help="With THREAD_ID: list every request of the thread, finished ones too.",
)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def queue_show(thread_id: UUID | None, include_finished: bool, as_json: bool) -> None:
    """Without THREAD_ID: one line per thread with running, interrupted or queued work or
    a paused backlog. RUN is the active run, the interrupted run or the run that paused
    the backlog.

    With THREAD_ID: that thread's queue state, then its requests in dispatch order:
    the request of the active or interrupted run, then the queued ones by position
    (a steer first)."""
    if thread_id is None:
        if include_finished:
            raise click.UsageError("--all needs a THREAD_ID")
        _show_queues(as_json)
    else:
        _show_thread_queue(thread_id, include_finished=include_finished, as_json=as_json)


def _show_queues(as_json: bool) -> None:
    from yuxi.queue.threads import thread_queue_list

    queues = with_database(thread_queue_list)
    if as_json:
        echo_json(queues)
        return
    if not queues:
        click.echo("no thread has running, interrupted, queued or paused work", err=True)
        return
    echo_table(
        (
            "THREAD",
            "STATUS",
            "REASON",
            "RUN",
            "RUN STATUS",
            "QUEUED",
            "WAITING SINCE",
            "OWNER",
            "AGENT",
        ),
        [_queue_row(q) for q in queues],
    )


def _queue_row(q: ThreadQueueListing) -> list[str]:
    return [
        str(q.thread_id),
        q.status,
        cell(q.paused_reason),
        cell(q.blocking_run_id),
        cell(_blocking_run_status(q)),
        str(q.queued_count),
        when(q.waiting_since),
        q.owner,
        q.agent_slug,
    ]


def _blocking_run_status(q: ThreadQueueListing) -> str | None:
    """The blocking run's status when it is the thread's last run (it nearly always is:
    the active run, the interrupted one, or the failed or cancelled one that paused)."""
    return q.last_run_status if q.blocking_run_id == q.last_run_id else None


def _show_thread_queue(thread_id: UUID, *, include_finished: bool, as_json: bool) -> None:
    async def read(
        conn: AsyncConnection[Any],
    ) -> tuple[list[ThreadQueueListing], list[QueueRequest]]:
        import psycopg

        from yuxi.queue.threads import thread_queue_list, thread_queue_requests

        # one snapshot, so the queued count agrees with the requests listed
        await conn.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)
        await conn.set_read_only(True)
        async with conn.transaction():
            queues = await thread_queue_list(conn, thread_id)
            requests = await thread_queue_requests(
                conn, thread_id, include_finished=include_finished
            )
        return queues, requests

    queues, requests = with_database(read)
    if not queues:
        raise click.ClickException(f"thread {thread_id} not found (unknown or deleted)")
    if as_json:
        echo_json({"queue": queues[0], "requests": requests})
        return
    _echo_thread_state(queues[0])
    if not requests:
        hint = "" if include_finished else "; --all lists finished ones too"
        click.echo(f"no active or queued requests{hint}", err=True)
        return
    click.echo()
    echo_table(
        ("POS", "REQUEST", "POLICY", "STATUS", "SOURCE", "RUN", "RUN STATUS", "CREATED", "MESSAGE"),
        [_request_row(r) for r in requests],
    )


def _echo_thread_state(q: ThreadQueueListing) -> None:
    run_status = _blocking_run_status(q)
    blocking = cell(q.blocking_run_id) + (f" ({run_status})" if run_status else "")
    lines = [
        ("thread", str(q.thread_id)),
        ("owner", f"{q.owner} ({q.uid})"),
        ("agent", q.agent_slug),
        ("status", q.status + (f" ({q.paused_reason})" if q.paused_reason else "")),
        ("blocking run", blocking),
        ("queued", str(q.queued_count)),
        ("waiting since", when(q.waiting_since)),
        ("can continue", "yes" if q.can_continue else "no"),
    ]
    for label, value in lines:
        click.echo(f"{label + ':':<15}{value}")


def _request_row(r: QueueRequest) -> list[str]:
    return [
        cell(r.queue_position),
        r.request_id,
        r.queue_policy,
        r.status,
        r.source,
        cell(r.run_id),
        cell(r.run_status),
        when(r.created_at),
        preview(r.query),
    ]
