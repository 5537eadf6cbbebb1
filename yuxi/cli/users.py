"""``yuxi user …``: create a user with a first token, list users."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from yuxi.cli.connect import JSON_HELP, echo_json, echo_table, when, with_database

if TYPE_CHECKING:
    from yuxi.queue.users import UserListing


@click.group()
def user() -> None:
    """Users and their API tokens."""


@user.command("create")
@click.argument("name")
@click.option("--admin", is_flag=True, help="The user may manage agents.")
def create_command(name: str, admin: bool) -> None:
    """Create user NAME; prints a new API token as the last line (shown only once)."""
    from yuxi.queue.users import user_create

    uid, token = with_database(lambda conn: user_create(conn, name, is_admin=admin))
    click.echo(f"created {'admin ' if admin else ''}user {name} ({uid})", err=True)
    click.echo(token)


@user.command("list")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def list_command(as_json: bool) -> None:
    """List live users: name, admin or not, how many unrevoked tokens they hold, when a
    token was last used. Tokens are never shown (only their hashes are stored)."""
    from yuxi.queue.users import user_list

    users = with_database(user_list)
    if as_json:
        echo_json(users)
        return
    if not users:
        click.echo("no users", err=True)
        return
    echo_table(
        ("NAME", "ADMIN", "TOKENS", "LAST USED", "CREATED", "ID"), [_user_row(u) for u in users]
    )


def _user_row(row: UserListing) -> list[str]:
    return [
        row.name,
        "yes" if row.is_admin else "no",
        str(row.active_tokens),
        when(row.last_used_at),
        when(row.created_at),
        str(row.id),
    ]
