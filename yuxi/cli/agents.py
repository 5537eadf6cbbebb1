"""``yuxi agent …``: list agents, show one as an agent file, create or update one from
such a file, through ``yuxi.agent_list`` and ``yuxi.agent_save`` (the function behind
``POST /api/agents`` and ``PUT /api/agents/{slug}``), after the same checks the API makes
on the body."""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Any

import click

from yuxi.cli.connect import JSON_HELP, cell, echo_json, echo_table, when, with_database

if TYPE_CHECKING:
    from yuxi.queue.agents import AgentListing, NewAgent


class AgentFileError(ValueError):
    """An agent file the API would refuse with a 400; the message says why."""


def parse_agent_file(data: bytes) -> NewAgent:
    """Decodes an agent file (the body of ``POST /api/agents``) and checks its backend
    and its config as the API does."""
    import msgspec

    from yuxi.agents.config import AgentConfigError, check_agent_config
    from yuxi.agents.registry import UnknownBackend, get_backend
    from yuxi.api.limits import check_json_depth
    from yuxi.queue.agents import NewAgent

    try:
        check_json_depth(data)
        spec = msgspec.json.decode(data, type=NewAgent)
    except msgspec.ValidationError as error:
        raise AgentFileError(f"invalid agent: {error}") from None
    except msgspec.DecodeError as error:
        raise AgentFileError(f"malformed JSON: {error}") from None
    except ValueError as error:  # nested too deep
        raise AgentFileError(str(error)) from None
    try:
        check_agent_config(get_backend(spec.backend_id), spec.config)
    except (UnknownBackend, AgentConfigError) as error:
        raise AgentFileError(str(error)) from None
    return spec


def agent_file(agent: AgentListing) -> dict[str, Any]:
    """The agent as the file ``parse_agent_file`` reads (to edit and save it again)."""
    return {
        "slug": agent.slug,
        "name": agent.name,
        "description": agent.description,
        "backend_id": agent.backend_id,
        "config": agent.config_json,
        "share_scope": agent.share_scope,
        "shared_with": [str(uid) for uid in agent.shared_with],
        "is_subagent": agent.is_subagent,
        "max_run_attempts": agent.max_run_attempts,
    }


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
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def list_command(as_json: bool) -> None:
    """List every agent, deleted ones included: slug, name, backend, who may see it
    (share scope and, for `selected`, the users it is shared with), created, updated."""
    from yuxi.queue.agents import agent_list

    agents = with_database(agent_list)
    if as_json:
        echo_json(agents)
        return
    if not agents:
        click.echo("no agents", err=True)
        return
    echo_table(
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
        cell(",".join(row.shared_with_names)),
        "yes" if row.is_subagent else "no",
        "live" if row.deleted_at is None else "deleted",
        when(row.created_at),
        when(row.updated_at),
    ]


@agent.command("show")
@click.argument("slug")
def show_command(slug: str) -> None:
    """Print agent SLUG as an agent file: edit it and pass it to `yuxi agent update`."""
    from yuxi.queue.agents import agent_list

    agents = with_database(agent_list)
    found = next((a for a in agents if a.slug == slug), None)
    if found is None:
        raise click.ClickException(f"agent {slug} not found")
    if found.deleted_at is not None:
        click.echo(f"note: agent {slug} is deleted; it cannot be updated", err=True)
    echo_json(agent_file(found))


_AGENT_FILE = click.File("rb")


@agent.command("create")
@click.argument("file", type=_AGENT_FILE)
def create_command(file: IO[bytes]) -> None:
    """Create an agent from FILE (JSON; `-` reads stdin), as POST /api/agents does.

    Refused with exit code 1: an unknown backend, a field the API refuses, a slug that
    exists (deleted agents included)."""
    _save_agent_file(file, create=True)


@agent.command("update")
@click.argument("file", type=_AGENT_FILE)
def update_command(file: IO[bytes]) -> None:
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
    from yuxi.queue.agents import agent_save

    with_database(lambda conn: agent_save(conn, spec.slug, spec, create=create))
    click.echo(f"{'created' if create else 'updated'} agent {spec.slug}", err=True)
