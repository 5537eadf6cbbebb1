"""``yuxi skill``: skills in the Agent Skills format, for operators and scripts: add a
shared skill (a new immutable version) from a directory or a ZIP, put one in a user's
workspace (in the file store) as a personal skill, list them, show a skill's versions,
delete one. Works on the database directly, as an operator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from yuxi.cli.connect import (
    JSON_HELP,
    database_url_or_exit,
    echo_json,
    echo_table,
    settings_or_exit,
    when,
    with_database,
)


@click.group()
def skill() -> None:
    """Skills: a directory with a SKILL.md (YAML front matter: name, description, ...)
    and the files beside it. Shared skills are stored in the database in versions;
    personal skills live in a user's workspace (in the database's file store) under
    skills/<name>/.
    """


def _read(source: Path) -> Any:
    from yuxi.skills.format import SkillFormatError, read_source

    try:
        return read_source(source)
    except SkillFormatError as error:
        raise click.ClickException(f"{source}: {error}") from None


@skill.command("add")
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--share-scope",
    type=click.Choice(["owner", "selected", "all"]),
    help="Who may use it: admins only, the --share-with users, everyone (new skills: all).",
)
@click.option("--share-with", "share_with", multiple=True, help="A user to share it with.")
@click.option(
    "--personal",
    metavar="USER",
    help="Put it in USER's workspace (skills/<name>/, in the file store) instead: a"
    " personal skill.",
)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def add_command(
    source: Path,
    share_scope: str | None,
    share_with: tuple[str, ...],
    personal: str | None,
    as_json: bool,
) -> None:
    """Add the skill in SOURCE (a directory or a .zip) whose SKILL.md names it.

    A shared skill gets a new version when its files differ from the latest one;
    the same files again change nothing. Prints the skill, version and sha256.
    """
    found = _read(source)
    if personal is not None:
        _add_personal(found, personal, as_json)
        return
    from yuxi.queue.users import user_by_name
    from yuxi.skills.store import add_shared_skill

    async def work(conn: Any) -> Any:
        shared = [await user_by_name(conn, user) for user in share_with] if share_with else None
        scope = "selected" if shared and share_scope is None else share_scope
        return await add_shared_skill(conn, None, found, share_scope=scope, shared_with=shared)

    added = with_database(work)
    if as_json:
        echo_json(added)
        return
    verb = "added" if added.created else "unchanged:"
    click.echo(f"{verb} skill {added.slug} version {added.version}", err=True)
    click.echo(f"{added.slug} {added.version} {added.sha256}")


def _add_personal(found: Any, owner: str, as_json: bool) -> None:
    """Writes the skill's files into the user's workspace in the file store (replacing
    that skill's directory, in one transaction), after checking its skill dependencies
    resolve for that user."""
    from psycopg_pool import AsyncConnectionPool

    from yuxi.files.store import PostgresFileStore
    from yuxi.queue.skills import skills_usable
    from yuxi.queue.users import user_by_name
    from yuxi.skills.store import place_personal_skill

    url = database_url_or_exit(settings_or_exit())

    async def work(conn: Any) -> None:
        uid = await user_by_name(conn, owner)
        shared = await skills_usable(conn, uid)
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            url, min_size=1, max_size=2, open=False, kwargs={"autocommit": True}
        )
        async with pool:
            await place_personal_skill(conn, PostgresFileStore(pool), uid, found, shared)

    with_database(work)
    meta = found.meta
    if as_json:
        echo_json({"slug": meta.name, "source": "personal", "sha256": found.sha256})
        return
    click.echo(f"added personal skill {meta.name} for {owner}", err=True)
    click.echo(f"{meta.name} personal {found.sha256}")


@skill.command("list")
@click.option("--user", "user_name", help="Only the shared skills this user may use.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def list_command(user_name: str | None, as_json: bool) -> None:
    """List shared skills (their latest versions)."""
    from yuxi.queue.skills import skills_usable
    from yuxi.queue.users import user_by_name

    async def work(conn: Any) -> Any:
        return await skills_usable(conn, await user_by_name(conn, user_name) if user_name else None)

    rows = with_database(work)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no skills", err=True)
        return
    echo_table(
        ("SKILL", "VERSION", "SHA256", "SCOPE", "DEPENDS", "UPDATED"),
        [
            (
                r.slug,
                str(r.version),
                r.sha256[:12],
                r.share_scope,
                ",".join([*r.depends_skills, *r.depends_tools, *r.depends_mcps]) or "-",
                when(r.updated_at),
            )
            for r in rows
        ],
    )


@skill.command("versions")
@click.argument("slug")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def versions_command(slug: str, as_json: bool) -> None:
    """List the versions of a shared skill, newest first."""
    from yuxi.queue.skills import skill_versions

    async def work(conn: Any) -> Any:
        return await skill_versions(conn, None, slug)

    rows = with_database(work)
    if as_json:
        echo_json(rows)
        return
    echo_table(
        ("VERSION", "SHA256", "FILES", "BYTES", "CREATED"),
        [(str(r.version), r.sha256, str(r.files), str(r.bytes), when(r.created_at)) for r in rows],
    )


@skill.command("delete")
@click.argument("slug")
def delete_command(slug: str) -> None:
    """Delete a shared skill and every version of it."""
    from yuxi.queue.skills import skill_delete

    async def work(conn: Any) -> None:
        await skill_delete(conn, None, slug)

    with_database(work)
    click.echo(f"deleted skill {slug}", err=True)
