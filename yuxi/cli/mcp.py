"""``yuxi mcp …``: MCP servers (what ``/api/mcp-servers`` manages): add, list, remove,
and the tools a worker discovers on one. Works on the database as the user ``--as``
names (default ``admin``), with the same rules as the API: stdio and shared servers
need an admin."""

from __future__ import annotations

import os
import time
from typing import Any

import click

from yuxi.cli.connect import (
    JSON_HELP,
    cell,
    database_url_or_exit,
    echo_json,
    echo_table,
    settings_or_exit,
    with_database,
)

AS_HELP = "Act as this user (a name; default admin)."


@click.group()
def mcp() -> None:
    """MCP servers whose tools agents call as <slug>__<tool>. Headers and env values
    are read from environment variables, sealed under the server key and never
    printed."""


def _secrets(pairs: tuple[str, ...], what: str) -> dict[str, str] | None:
    """``NAME=VAR`` pairs: each value read from environment variable VAR."""
    if not pairs:
        return None
    values: dict[str, str] = {}
    for pair in pairs:
        name, sep, var = pair.partition("=")
        if not sep or not name or not var:
            raise click.UsageError(f"--{what} takes NAME=ENV_VAR, got {pair!r}")
        value = os.environ.get(var)
        if value is None:
            raise click.ClickException(f"environment variable {var} is not set")
        values[name] = value
    return values


@mcp.command("add")
@click.argument("slug")
@click.option("--name", help="Display name (default: the slug).")
@click.option(
    "--transport",
    type=click.Choice(["streamable_http", "sse", "stdio"]),
    help="Default: stdio with --command, streamable_http with --url.",
)
@click.option("--url", help="The server's URL (HTTP transports).")
@click.option("--command", "command_", metavar="CMD", help="The command to run (stdio).")
@click.option("--arg", "args", multiple=True, help="An argument of the command (repeatable).")
@click.option("--header", "headers", multiple=True, metavar="NAME=ENV_VAR", help="A header.")
@click.option("--env", "env", multiple=True, metavar="NAME=ENV_VAR", help="An env variable.")
@click.option(
    "--share",
    type=click.Choice(["owner", "all", "admins", "selected"]),
    default="all",
    show_default=True,
    help="Who may use it (owner: only the --as user).",
)
@click.option("--share-with", "share_with", multiple=True, help="A user (with --share selected).")
@click.option(
    "--connect-timeout",
    type=click.FloatRange(0, 120, min_open=True),
    help="Seconds to connect and list its tools in a run (default 10).",
)
@click.option(
    "--call-timeout",
    type=click.FloatRange(0, 3600, min_open=True),
    help="Seconds one tool call may take (default 60).",
)
@click.option("--disabled", is_flag=True, help="Register it disabled.")
@click.option("--as", "as_user", default="admin", show_default=True, help=AS_HELP)
def add_command(slug: str, **options: Any) -> None:
    """Register MCP server SLUG (lower-case letters, digits and dashes)."""
    import uuid

    from yuxi.cli.server_key import server_key_or_exit
    from yuxi.mcp.secrets import seal_map
    from yuxi.queue.mcp import mcp_server_create
    from yuxi.queue.users import user_by_name

    transport = options["transport"] or ("stdio" if options["command_"] else "streamable_http")
    fields: dict[str, Any] = {
        "slug": slug,
        "name": options["name"] or slug,
        "transport": transport,
        "share_scope": options["share"],
        "enabled": not options["disabled"],
    }
    for key, option in (
        ("url", "url"),
        ("command", "command_"),
        ("connect_timeout_seconds", "connect_timeout"),
        ("call_timeout_seconds", "call_timeout"),
    ):
        if options[option] is not None:
            fields[key] = options[option]
    if options["args"]:
        fields["args"] = list(options["args"])
    headers = _secrets(options["headers"], "header")
    env = _secrets(options["env"], "env")
    settings = settings_or_exit()
    box = server_key_or_exit(settings, database_url_or_exit(settings))
    server_id = uuid.uuid4()

    async def add(conn: Any) -> Any:
        uid = await user_by_name(conn, options["as_user"])
        shared = [await user_by_name(conn, name) for name in options["share_with"]]
        return await mcp_server_create(
            conn,
            server_id,
            uid,
            fields,
            shared_with=shared,
            headers=seal_map(box, server_id, "headers", headers) if headers else None,
            env=seal_map(box, server_id, "env", env) if env else None,
        )

    row = with_database(add)
    click.echo(f"added MCP server {row.slug} ({row.transport}, {row.share_scope})", err=True)


@mcp.command("list")
@click.option("--as", "as_user", default="admin", show_default=True, help=AS_HELP)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def list_command(as_user: str, as_json: bool) -> None:
    """List the MCP servers the user sees (never a header's or env's value)."""
    from yuxi.queue.mcp import mcp_server_list
    from yuxi.queue.users import user_by_name

    async def listed(conn: Any) -> Any:
        return await mcp_server_list(conn, await user_by_name(conn, as_user))

    rows = with_database(listed)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no MCP servers", err=True)
        return
    echo_table(
        ("SLUG", "TRANSPORT", "TARGET", "SECRETS", "SHARE", "STATE"),
        [
            [
                m.slug,
                m.transport,
                m.url or " ".join([m.command or "", *m.args]),
                cell(", ".join([*m.header_names, *m.env_names])),
                m.share_scope,
                "enabled" if m.enabled else "disabled",
            ]
            for m in rows
        ],
    )


@mcp.command("remove")
@click.argument("slug")
@click.option("--as", "as_user", default="admin", show_default=True, help=AS_HELP)
def remove_command(slug: str, as_user: str) -> None:
    """Remove MCP server SLUG."""
    from yuxi.queue.mcp import mcp_server_delete
    from yuxi.queue.users import user_by_name

    async def remove(conn: Any) -> None:
        await mcp_server_delete(conn, await user_by_name(conn, as_user), slug)

    with_database(remove)
    click.echo(f"removed MCP server {slug}", err=True)


@mcp.command("tools")
@click.argument("slug")
@click.option("--as", "as_user", default="admin", show_default=True, help=AS_HELP)
@click.option("--wait", "wait_seconds", default=20.0, show_default=True, help="Seconds to wait.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def tools_command(slug: str, as_user: str, wait_seconds: float, as_json: bool) -> None:
    """The tools a worker discovers on SLUG now (needs a running worker)."""
    import asyncio

    from yuxi.queue.mcp import mcp_tools_get, mcp_tools_request
    from yuxi.queue.users import user_by_name

    async def discover(conn: Any) -> Any:
        uid = await user_by_name(conn, as_user)
        listed = await mcp_tools_request(conn, uid, slug, max_age_seconds=0)
        deadline = time.monotonic() + wait_seconds
        while listed.pending and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            listed = await mcp_tools_get(conn, uid, slug)
        return listed

    listed = with_database(discover)
    if as_json:
        echo_json(listed)
        return
    if listed.pending:
        raise click.ClickException(f"no worker discovered {slug}'s tools yet (is one running?)")
    if listed.error:
        raise click.ClickException(listed.error)
    echo_table(
        ("TOOL", "DESCRIPTION"),
        [[t["tool"], _first_line(t.get("description"))] for t in listed.tools],
    )


def _first_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else "-"


@mcp.command("rekey")
def rekey_command() -> None:
    """Re-seal every stored secret under the current server key after a rotation: the
    MCP servers' headers and env and the models' keys (the same flow as ``yuxi model
    rekey``); then the database records the new key."""
    from yuxi.cli.server_key import rekey_or_exit

    rekey_or_exit()
