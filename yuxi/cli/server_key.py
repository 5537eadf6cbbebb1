"""The server key as the ``yuxi`` command uses it: the check a process makes before it
seals or opens a secret (``server_key_or_exit``: ``yuxi up``, ``api``, ``worker``,
``model add``, ``mcp add``, the rekeys), and the one re-sealing flow after a rotation
(``rekey_or_exit``: ``yuxi model rekey`` and ``yuxi mcp rekey``)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import click

from yuxi.cli.connect import database_url_or_exit, settings_or_exit, with_database
from yuxi.settings import Settings, SettingsError

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from yuxi.models.secret_box import SecretBox

log = logging.getLogger("yuxi.server_key")


def server_key_or_exit(settings: Settings, url: str, *, wait: bool = False) -> SecretBox:
    """The server key, once the database agrees it is this database's: recorded there
    when none is, or the recorded one (or, during a rotation, one of the previous keys).
    Another key is a one-paragraph error and exit code 1. ``wait``: while the database
    cannot be reached, try again (the serving processes start before their database);
    otherwise that is an error at once."""
    import psycopg
    from psycopg import AsyncConnection

    from yuxi.db.outages import until_reachable
    from yuxi.models.secret_box import SecretBox
    from yuxi.models.server_key import server_key_verify

    try:
        box = SecretBox.from_env(settings.home)
    except SettingsError as error:
        raise click.ClickException(str(error)) from None

    async def check() -> str:
        async with await AsyncConnection.connect(url, autocommit=True) as conn:
            return await server_key_verify(conn, box)

    async def checked() -> str:
        if wait:
            return await until_reachable(check, log=log, what="check the server key")
        return await check()

    try:
        verdict = asyncio.run(checked())
    except SettingsError as error:  # ServerKeyMismatch
        raise click.ClickException(str(error)) from None
    except (
        psycopg.errors.UndefinedFunction,
        psycopg.errors.UndefinedTable,
        psycopg.errors.InvalidSchemaName,
    ):
        raise click.ClickException(
            "the database has no yuxi schema, or an older one: run `yuxi db migrate` first"
        ) from None
    except psycopg.Error as error:
        raise click.ClickException(f"cannot check the server key: {error}") from None
    if verdict == "recorded":
        click.echo(
            "recorded this server key's identifier in the database: every host of this"
            " database must use the same key (YUXI_SECRET_KEY)",
            err=True,
        )
    elif verdict == "previous":
        click.echo(
            "the database records a key of YUXI_SECRET_KEY_PREVIOUS: a rotation is under"
            " way; `yuxi model rekey` re-seals every secret and records the new key",
            err=True,
        )
    return box


def rekey_or_exit() -> None:
    """Re-seals every stored secret (model API keys, MCP servers' headers and env) that
    is under another key than the current one, then, when none is left, records the
    current key in the database in place of the previous one."""
    settings = settings_or_exit()
    box = server_key_or_exit(settings, database_url_or_exit(settings))

    async def rekey(conn: AsyncConnection[Any]) -> tuple[int, int, int, int]:
        from yuxi.models.server_key import server_key_record

        models, kept = await _reseal_model_keys(conn, box)
        mcp = await _reseal_mcp_secrets(conn, box)
        # a process still on the old key may have sealed something meanwhile
        left = await _left_under_other_keys(conn, box)
        if not left:
            await server_key_record(conn, box)
        return models, kept, mcp, left

    try:
        models, kept, mcp, left = with_database(rekey)
    except SettingsError as error:  # ServerKeyMismatch: another key was recorded meanwhile
        raise click.ClickException(str(error)) from None
    click.echo(f"re-sealed {models} keys; {kept} already under the current key", err=True)
    click.echo(f"re-sealed {mcp} MCP secrets", err=True)
    if left:
        raise click.ClickException(
            f"{left} secrets were sealed under an older key meanwhile (a process still on"
            " it); the database still records the previous key: run this again"
        )
    click.echo("the database records the current server key", err=True)


async def _reseal_model_keys(conn: AsyncConnection[Any], box: SecretBox) -> tuple[int, int]:
    from yuxi.models.registry import model_context
    from yuxi.models.secret_box import SecretError
    from yuxi.queue.models import model_reseal, model_sealed_keys

    done = kept = 0
    for model_id, sealed in await model_sealed_keys(conn):
        if not box.needs_rekey(sealed):
            kept += 1
            continue
        try:
            key = box.open(sealed, model_context(model_id))
        except SecretError as error:
            raise click.ClickException(f"model {model_id}: {error}") from None
        await model_reseal(conn, model_id, sealed, box.seal(key, model_context(model_id)))
        done += 1
    return done, kept


async def _reseal_mcp_secrets(conn: AsyncConnection[Any], box: SecretBox) -> int:
    from yuxi.mcp.secrets import secret_context
    from yuxi.models.secret_box import SecretError
    from yuxi.queue.mcp import mcp_server_reseal, mcp_server_sealed_secrets

    done = 0
    for server_id, kind, sealed in await mcp_server_sealed_secrets(conn):
        if not box.needs_rekey(sealed):
            continue
        context = secret_context(server_id, kind)
        try:
            opened = box.open(sealed, context)
        except SecretError as error:
            raise click.ClickException(f"MCP server {server_id}: {error}") from None
        await mcp_server_reseal(conn, server_id, kind, sealed, box.seal(opened, context))
        done += 1
    return done


async def _left_under_other_keys(conn: AsyncConnection[Any], box: SecretBox) -> int:
    from yuxi.queue.mcp import mcp_server_sealed_secrets
    from yuxi.queue.models import model_sealed_keys

    sealed = [value for _, value in await model_sealed_keys(conn)]
    sealed += [value for _, _, value in await mcp_server_sealed_secrets(conn)]
    return sum(1 for value in sealed if box.needs_rekey(value))


def restored_key_note(settings: Settings, url: str) -> None:
    """After a restore: says on stderr when the restored database records a server key
    this host does not have (its processes would refuse to start). Records nothing: the
    check is rolled back."""
    import os

    from psycopg import AsyncConnection

    from yuxi.models.secret_box import KEY_FILE, SecretBox
    from yuxi.queue.server_key import server_key_check

    configured = bool(os.environ.get("YUXI_SECRET_KEY")) or (settings.home / KEY_FILE).exists()
    try:
        box = SecretBox.from_env(settings.home) if configured else SecretBox(os.urandom(32))
    except SettingsError as error:
        raise click.ClickException(str(error)) from None

    async def verdict() -> str:
        async with await AsyncConnection.connect(url) as conn:
            try:
                return await server_key_check(conn, box.key_id, box.previous_key_ids)
            finally:
                await conn.rollback()

    if asyncio.run(verdict()) != "other":
        return
    if configured:
        click.echo(
            "note: the restored database records another server key than this host's:"
            " yuxi would refuse to start here; set YUXI_SECRET_KEY to the key of the host"
            " that made the dump (its secrets are sealed under it)",
            err=True,
        )
    else:
        click.echo(
            "note: the restored database's secrets are sealed under the server key of the"
            " host that made the dump: set YUXI_SECRET_KEY to it (or copy its secret.key"
            " into YUXI_HOME) before starting yuxi here",
            err=True,
        )
