"""``yuxi user …``: create, list and delete users; issue, list and revoke their API
tokens. A user is named by its name (live names are unique)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

import click

from yuxi.cli.connect import JSON_HELP, echo_json, echo_table, when, with_database

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from yuxi.queue.users import Token, UserListing


@click.group()
def user() -> None:
    """Users and their API tokens."""


@user.command("create")
@click.argument("name")
@click.option("--admin", is_flag=True, help="The user may manage agents.")
@click.option(
    "--login-link",
    is_flag=True,
    help="Also print a single-use link that signs the user in to the web console.",
)
def create_command(name: str, admin: bool, login_link: bool) -> None:
    """Create user NAME; prints a new API token as the last line (shown only once)."""
    from yuxi.queue.login_codes import login_code_create
    from yuxi.queue.users import user_create

    async def create(conn: AsyncConnection[Any]) -> tuple[UUID, str, str | None]:
        uid, token = await user_create(conn, name, is_admin=admin)
        code = await login_code_create(conn, uid) if login_link else None
        return uid, token, code

    uid, token, code = with_database(create)
    click.echo(f"created {'admin ' if admin else ''}user {name} ({uid})", err=True)
    if code is not None:
        _echo_login_link(code)
    click.echo(token)


@user.command("login-link")
@click.argument("name")
def login_link_command(name: str) -> None:
    """Print a link that signs user NAME in to the web console: it works once, within
    15 minutes, and creates a new API token for that browser (revocable like any)."""
    from yuxi.queue.login_codes import login_code_create

    async def create(conn: AsyncConnection[Any]) -> str:
        return await login_code_create(conn, await _uid_of(conn, name))

    _echo_login_link(with_database(create))


def _echo_login_link(code: str) -> None:
    from yuxi.cli.connect import settings_or_exit
    from yuxi.queue.login_codes import LOGIN_CODE_TTL, login_link

    settings = settings_or_exit()
    minutes = int(LOGIN_CODE_TTL.total_seconds() // 60)
    link = login_link(f"http://{settings.host}:{settings.port}", code)
    click.echo(f"login link (single use, {minutes} minutes): {link}")


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


async def _uid_of(conn: AsyncConnection[Any], name: str) -> UUID:
    from yuxi.queue.users import user_list

    for row in await user_list(conn):
        if row.name == name:
            return row.id
    raise click.ClickException(f"user {name} not found")


@user.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def delete_command(name: str, yes: bool) -> None:
    """Delete user NAME: its tokens stop working at once and its scheduled jobs are
    removed; its conversations and runs stay in the database for the record."""
    from yuxi.queue.users import user_delete

    if not yes:
        click.confirm(f"delete user {name}? its tokens stop working now", abort=True, err=True)

    async def delete(conn: AsyncConnection[Any]) -> None:
        await user_delete(conn, await _uid_of(conn, name))

    with_database(delete)
    click.echo(f"deleted user {name}", err=True)


@user.command("token")
@click.argument("name")
@click.option("--label", default="default", show_default=True, help="A name for the token.")
def token_command(name: str, label: str) -> None:
    """Issue a new API token for user NAME; prints it as the last line (shown only once)."""
    from yuxi.queue.users import token_create

    async def issue(conn: AsyncConnection[Any]) -> str:
        return await token_create(conn, await _uid_of(conn, name), name=label)

    token = with_database(issue)
    click.echo(f"new token for {name} ({label})", err=True)
    click.echo(token)


@user.command("tokens")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def tokens_command(name: str, as_json: bool) -> None:
    """List user NAME's tokens, newest first: id, label, created, last used, revoked.
    The tokens themselves are never shown (only their hashes are stored)."""
    from yuxi.queue.users import token_list

    async def read(conn: AsyncConnection[Any]) -> list[Token]:
        return await token_list(conn, await _uid_of(conn, name))

    tokens = with_database(read)
    if as_json:
        echo_json(tokens)
        return
    echo_table(
        ("ID", "LABEL", "CREATED", "LAST USED", "REVOKED"),
        [
            [str(t.id), t.name, when(t.created_at), when(t.last_used_at), when(t.revoked_at)]
            for t in tokens
        ],
    )


@user.command("revoke")
@click.argument("name")
@click.argument("token_id", type=click.UUID, required=False)
@click.option("--all", "revoke_all", is_flag=True, help="Revoke every active token of NAME.")
def revoke_command(name: str, token_id: UUID | None, revoke_all: bool) -> None:
    """Revoke token TOKEN_ID of user NAME (ids from `yuxi user tokens NAME`), or with
    --all every active one. A revoked token is refused from the next request on."""
    from yuxi.queue.users import token_revoke

    if (token_id is None) == (not revoke_all):
        raise click.UsageError("give a TOKEN_ID or --all (not both)")

    async def revoke(conn: AsyncConnection[Any]) -> int:
        return await token_revoke(conn, await _uid_of(conn, name), token_id)

    count = with_database(revoke)
    click.echo(f"revoked {count} token(s) of {name}", err=True)


@user.command("credit", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("amount", required=False)
@click.option("--reason", default=None, help="Why (kept in the ledger).")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def credit_command(name: str, amount: str | None, reason: str | None, as_json: bool) -> None:
    """Top up (+N) or lower (-N) user NAME's credit balance, or show it without AMOUNT.

    The first top-up gives the user a budget: runs on priced platform models then
    freeze credits when claimed and are charged their cost when they end. A balance
    never goes below 0. Every change is a ledger row (yuxi.credit_ledger)."""
    from decimal import Decimal, InvalidOperation

    from yuxi.queue.credits import credit_add, credit_report

    change: Decimal | None = None
    if amount is not None:
        try:
            change = Decimal(amount)
        except InvalidOperation:
            raise click.BadParameter(f"{amount!r} is not a number", param_hint="AMOUNT") from None
        if not change.is_finite():
            raise click.BadParameter(f"{amount!r} is not a number", param_hint="AMOUNT")

    async def apply(conn: AsyncConnection[Any]) -> dict[str, Any] | None:
        uid = await _uid_of(conn, name)
        if change is not None:
            await credit_add(conn, uid, change, reason=reason)
        return await credit_report(conn, uid, limit=10)

    report = with_database(apply)
    if as_json:
        echo_json(report)
        return
    if report is None:
        click.echo(f"{name} has no budget (runs are never stopped for credits)")
        return
    click.echo(f"{name}: balance {report['balance']}, frozen by running runs {report['frozen']}")
    echo_table(
        ("WHEN", "KIND", "DELTA", "BALANCE", "RUN", "REASON"),
        [
            [
                str(row["created_at"])[:19],
                row["kind"],
                str(row["delta"]),
                str(row["balance_after"]),
                str(row["run_id"] or ""),
                row["reason"] or "",
            ]
            for row in report["ledger"]
        ],
    )
