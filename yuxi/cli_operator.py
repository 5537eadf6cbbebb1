"""The operator's commands: ``yuxi agent …``, ``yuxi user list``, ``yuxi queue show``.

They read through the SQL functions of 0009_operator_reads.sql and write through the
same functions as the API (``yuxi.operator``); ``yuxi.cli`` attaches them to ``yuxi``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import IO, Any, TypeVar
from uuid import UUID

import click
import msgspec
import psycopg
from psycopg import AsyncConnection

from yuxi.cli_support import database_url_or_exit, settings_or_exit
from yuxi.operator import (
    AgentFileError,
    AgentListing,
    QueueRequest,
    ThreadQueueListing,
    UserListing,
    agent_file,
    list_agents,
    list_thread_queues,
    list_users,
    parse_agent_file,
    save_agent,
    thread_queue_requests,
)
from yuxi.queue.errors import QueueError

T = TypeVar("T")


def _with_database(work: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
    """Runs ``work`` on one autocommit connection to the database in use. A refusal by
    the database becomes a one-line error and exit code 1, never a traceback."""
    url = database_url_or_exit(settings_or_exit())

    async def run() -> T:
        async with await AsyncConnection.connect(url, autocommit=True) as conn:
            return await work(conn)

    try:
        return asyncio.run(run())
    except QueueError as error:
        raise click.ClickException(str(error)) from None
    except (psycopg.errors.UndefinedFunction, psycopg.errors.InvalidSchemaName) as error:
        raise click.ClickException(
            f"{_database_message(error)} (run `yuxi db migrate` to bring the schema up to date)"
        ) from None
    except psycopg.Error as error:
        raise click.ClickException(_database_message(error)) from None


def _database_message(error: psycopg.Error) -> str:
    """The error on one line (a connection failure's message spans several)."""
    primary = error.diag.message_primary if error.diag else None
    lines = [line.strip() for line in (primary or str(error)).splitlines() if line.strip()]
    return "; ".join(lines) or type(error).__name__


def _echo_json(value: Any) -> None:
    click.echo(msgspec.json.format(msgspec.json.encode(value), indent=2).decode())


def _echo_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Left-aligned columns two spaces apart, a header line first."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    for line in (headers, *rows):
        cells = (cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        click.echo("  ".join(cells).rstrip())


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _cell(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def _preview(text: str | None, width: int = 40) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


_JSON_HELP = "Print JSON instead of a table (for scripts)."


@click.group()
def agent() -> None:
    """Agents: list them, show one as a JSON file, create or update one from such a file.

    An agent file is the body of POST /api/agents:

    \b
    {"slug": "notes", "name": "Notes", "backend_id": "chatbot",
     "description": "Takes notes",
     "config": {"context": {"model": "builtin:scripted", "tools": ["write_file"]}},
     "share_scope": "selected", "shared_with": ["<user id>"],
     "is_subagent": false, "max_run_attempts": 1}

    slug, name and backend_id are required; the other fields default to "", {"context":
    {}}, "all", [], false and 1. Unknown fields are refused.
    """


@agent.command("list")
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
def agent_list(as_json: bool) -> None:
    """List every agent, deleted ones included: slug, name, backend, who may see it
    (share scope and, for `selected`, the users it is shared with), created, updated."""
    agents = _with_database(list_agents)
    if as_json:
        _echo_json(agents)
        return
    if not agents:
        click.echo("no agents", err=True)
        return
    _echo_table(
        (
            "SLUG",
            "NAME",
            "BACKEND",
            "SCOPE",
            "SHARED WITH",
            "SUBAGENT",
            "STATE",
            "CREATED",
            "UPDATED",
        ),
        [_agent_row(a) for a in agents],
    )


def _agent_row(row: AgentListing) -> list[str]:
    return [
        row.slug,
        row.name,
        row.backend_id,
        row.share_scope,
        _cell(",".join(row.shared_with_names)),
        "yes" if row.is_subagent else "no",
        "live" if row.deleted_at is None else "deleted",
        _when(row.created_at),
        _when(row.updated_at),
    ]


@agent.command("show")
@click.argument("slug")
def agent_show(slug: str) -> None:
    """Print agent SLUG as an agent file: edit it and pass it to `yuxi agent update`."""
    agents = _with_database(list_agents)
    found = next((a for a in agents if a.slug == slug), None)
    if found is None:
        raise click.ClickException(f"agent {slug} not found")
    if found.deleted_at is not None:
        click.echo(f"note: agent {slug} is deleted; it cannot be updated", err=True)
    _echo_json(agent_file(found))


_AGENT_FILE = click.File("rb")


@agent.command("create")
@click.argument("file", type=_AGENT_FILE)
def agent_create(file: IO[bytes]) -> None:
    """Create an agent from FILE (JSON; `-` reads stdin), as POST /api/agents does.

    Refused with exit code 1: an unknown backend, a field the API refuses, a slug that
    exists (deleted agents included)."""
    _save_agent_file(file, create=True)


@agent.command("update")
@click.argument("file", type=_AGENT_FILE)
def agent_update(file: IO[bytes]) -> None:
    """Replace every setting of the live agent named by FILE's slug, as
    PUT /api/agents/{slug} does (fields left out get their defaults, not the old values;
    start from `yuxi agent show SLUG`). FILE is JSON; `-` reads stdin."""
    _save_agent_file(file, create=False)


def _save_agent_file(file: IO[bytes], *, create: bool) -> None:
    name = str(getattr(file, "name", "<stdin>"))  # stdin has no name under some callers
    try:
        data = file.read()
    except OSError as error:
        raise click.ClickException(f"cannot read {name}: {error}") from None
    try:
        spec = parse_agent_file(data)
    except AgentFileError as error:
        raise click.ClickException(f"{name}: {error}") from None
    _with_database(lambda conn: save_agent(conn, spec.slug, spec, create=create))
    click.echo(f"{'created' if create else 'updated'} agent {spec.slug}", err=True)


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
def user_list(as_json: bool) -> None:
    """List live users: name, admin or not, how many unrevoked tokens they hold, when a
    token was last used. Tokens are never shown (only their hashes are stored)."""
    users = _with_database(list_users)
    if as_json:
        _echo_json(users)
        return
    if not users:
        click.echo("no users", err=True)
        return
    _echo_table(
        ("NAME", "ADMIN", "TOKENS", "LAST USED", "CREATED", "ID"), [_user_row(u) for u in users]
    )


def _user_row(row: UserListing) -> list[str]:
    return [
        row.name,
        "yes" if row.is_admin else "no",
        str(row.active_tokens),
        _when(row.last_used_at),
        _when(row.created_at),
        str(row.id),
    ]


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
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
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
    queues = _with_database(list_thread_queues)
    if as_json:
        _echo_json(queues)
        return
    if not queues:
        click.echo("no thread has running, interrupted, queued or paused work", err=True)
        return
    _echo_table(
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
        _cell(q.paused_reason),
        _cell(q.blocking_run_id),
        _cell(_blocking_run_status(q)),
        str(q.queued_count),
        _when(q.waiting_since),
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
        # one snapshot, so the queued count agrees with the requests listed
        await conn.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)
        await conn.set_read_only(True)
        async with conn.transaction():
            queues = await list_thread_queues(conn, thread_id)
            requests = await thread_queue_requests(
                conn, thread_id, include_finished=include_finished
            )
        return queues, requests

    queues, requests = _with_database(read)
    if not queues:
        raise click.ClickException(f"thread {thread_id} not found (unknown or deleted)")
    if as_json:
        _echo_json({"queue": queues[0], "requests": requests})
        return
    _echo_thread_state(queues[0])
    if not requests:
        hint = "" if include_finished else "; --all lists finished ones too"
        click.echo(f"no active or queued requests{hint}", err=True)
        return
    click.echo()
    _echo_table(
        ("POS", "REQUEST", "POLICY", "STATUS", "SOURCE", "RUN", "RUN STATUS", "CREATED", "MESSAGE"),
        [_request_row(r) for r in requests],
    )


def _echo_thread_state(q: ThreadQueueListing) -> None:
    run_status = _blocking_run_status(q)
    blocking = _cell(q.blocking_run_id) + (f" ({run_status})" if run_status else "")
    lines = [
        ("thread", str(q.thread_id)),
        ("owner", f"{q.owner} ({q.uid})"),
        ("agent", q.agent_slug),
        ("status", q.status + (f" ({q.paused_reason})" if q.paused_reason else "")),
        ("blocking run", blocking),
        ("queued", str(q.queued_count)),
        ("waiting since", _when(q.waiting_since)),
        ("can continue", "yes" if q.can_continue else "no"),
    ]
    for label, value in lines:
        click.echo(f"{label + ':':<15}{value}")


def _request_row(r: QueueRequest) -> list[str]:
    return [
        _cell(r.queue_position),
        r.request_id,
        r.queue_policy,
        r.status,
        r.source,
        _cell(r.run_id),
        _cell(r.run_status),
        _when(r.created_at),
        _preview(r.query),
    ]
