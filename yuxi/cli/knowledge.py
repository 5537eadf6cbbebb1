"""``yuxi kb``: knowledge bases for operators and scripts: create, list, upload (into
the file store, with progress while the worker ingests), search. Works on the database
directly, as an operator: a knowledge base is named by its id or OWNER/SLUG."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any
from uuid import UUID

import click

from yuxi.cli.connect import (
    JSON_HELP,
    cell,
    database_url_or_exit,
    echo_json,
    echo_table,
    preview,
    settings_or_exit,
    when,
    with_database,
)

READ_BYTES = 1024 * 1024


@click.group()
def kb() -> None:
    """Knowledge bases: create one, list them, upload documents, search.

    A knowledge base is named by its id or OWNER/SLUG (e.g. alice/handbook). Documents
    are ingested by a worker (`yuxi up` or `yuxi worker`): txt, md, html, pdf, docx.
    """


@kb.command("create")
@click.argument("name")
@click.option("--owner", required=True, help="The user who owns it (a name).")
@click.option("--slug", help="Its slug (default: made from the name).")
@click.option("--description", default="", help="What it holds.")
@click.option(
    "--embedding-model",
    help="provider:model of its embeddings, e.g. openai:text-embedding-3-small"
    " (default: none, full-text search only).",
)
@click.option(
    "--share-scope",
    type=click.Choice(["owner", "selected", "all"]),
    default="owner",
    help="Who else may read it: nobody, the --share-with users, everyone.",
)
@click.option("--share-with", "share_with", multiple=True, help="A user to share it with.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def create_command(
    name: str,
    owner: str,
    slug: str | None,
    description: str,
    embedding_model: str | None,
    share_scope: str,
    share_with: tuple[str, ...],
    as_json: bool,
) -> None:
    """Create a knowledge base; prints its id as the last line."""
    from yuxi.agents.models import ModelSpecError
    from yuxi.knowledge.embed import check_embedding_model
    from yuxi.queue.knowledge import kb_create
    from yuxi.queue.users import user_by_name

    try:
        model = check_embedding_model(embedding_model) if embedding_model else None
    except ModelSpecError as error:
        raise click.ClickException(str(error)) from None

    async def work(conn: Any) -> Any:
        uid = await user_by_name(conn, owner)
        shared = [await user_by_name(conn, user) for user in share_with]
        return await kb_create(
            conn,
            uid,
            name=name,
            description=description,
            embedding_model=model,
            share_scope="selected" if shared and share_scope == "owner" else share_scope,
            shared_with=shared,
            slug=slug,
        )

    created = with_database(work)
    if as_json:
        echo_json(created)
        return
    click.echo(f"created knowledge base {created.owner_name}/{created.slug}", err=True)
    click.echo(str(created.id))


@kb.command("list")
@click.option("--owner", help="Only what this user may read (a name).")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def list_command(owner: str | None, as_json: bool) -> None:
    """List knowledge bases: every one, or those a user may read."""
    from yuxi.queue.knowledge import kb_list
    from yuxi.queue.users import user_by_name

    async def work(conn: Any) -> Any:
        return await kb_list(conn, await user_by_name(conn, owner) if owner else None)

    rows = with_database(work)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no knowledge bases", err=True)
        return
    echo_table(
        (
            "ID",
            "KNOWLEDGE BASE",
            "NAME",
            "EMBEDDINGS",
            "SCOPE",
            "DOCS",
            "READY",
            "CHUNKS",
            "UPDATED",
        ),
        [
            [
                str(r.id),
                f"{r.owner_name}/{r.slug}",
                preview(r.name, 30),
                cell(r.embedding_model),
                r.share_scope,
                str(r.documents),
                str(r.ready_documents),
                str(r.chunks),
                when(r.updated_at),
            ]
            for r in rows
        ],
    )


@kb.command("upload")
@click.argument("knowledge_base")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--no-wait", is_flag=True, help="Return once uploaded, before ingestion.")
@click.option(
    "--timeout",
    "wait_seconds",
    default=600.0,
    show_default=True,
    help="Seconds to wait for ingestion.",
)
def upload_command(
    knowledge_base: str, files: tuple[Path, ...], no_wait: bool, wait_seconds: float
) -> None:
    """Upload documents and wait until the worker has ingested them, saying how each
    ends. Exits 1 when any failed. The same content twice is one document."""
    settings = settings_or_exit()
    url = database_url_or_exit(settings)
    failed = asyncio.run(_upload(url, knowledge_base, files, no_wait, wait_seconds))
    if failed:
        raise SystemExit(1)


async def _upload(
    url: str,
    reference: str,
    files: tuple[Path, ...],
    no_wait: bool,
    wait_seconds: float,
) -> int:
    from psycopg_pool import AsyncConnectionPool

    from yuxi.files.attachments import ReceivedFile
    from yuxi.files.store import PostgresFileStore
    from yuxi.knowledge.documents import commit_documents
    from yuxi.queue.errors import QueueError
    from yuxi.queue.knowledge import kb_document_list, kb_find, kb_get

    pool = AsyncConnectionPool(url, min_size=1, max_size=2, open=False, kwargs={"autocommit": True})
    await pool.open()
    try:
        async with pool.connection() as conn:
            try:
                kb_id = await kb_find(conn, reference)
                owner = (await kb_get(conn, None, kb_id)).uid
            except QueueError as error:
                raise click.ClickException(str(error)) from None
        store = PostgresFileStore(pool)
        total = len(files)
        ids: dict[UUID, str] = {}
        for n, path in enumerate(files, 1):
            # streamed into the store a chunk at a time, as its owner's
            upload = ReceivedFile.open(store, owner, path.name, None, limit=2**62)
            try:
                with path.open("rb") as source:
                    while data := await asyncio.to_thread(source.read, READ_BYTES):
                        await upload.write(data)
            except BaseException:
                await upload.discard()
                raise
            try:
                [row] = await commit_documents(pool, None, kb_id, [upload])
            except QueueError as error:
                raise click.ClickException(f"{path.name}: {error}") from None
            ids[row.id] = row.filename
            state = "new" if row.created else f"already there, {row.status}"
            click.echo(f"[{n}/{total}] uploaded {row.filename} ({row.bytes} bytes): {state}")
        if no_wait:
            return 0
        seen: dict[UUID, str] = {}
        deadline = time.monotonic() + wait_seconds
        while True:
            async with pool.connection() as conn:
                documents = {
                    d.id: d for d in await kb_document_list(conn, None, kb_id) if d.id in ids
                }
            for doc in documents.values():
                if seen.get(doc.id) != doc.status and doc.status in ("ready", "failed"):
                    seen[doc.id] = doc.status
                    detail = f"{doc.chunks} chunks" if doc.status == "ready" else doc.error
                    click.echo(f"[{len(seen)}/{total}] {doc.status} {doc.filename}: {detail}")
            if len(seen) == len(ids):
                break
            if time.monotonic() > deadline:
                waiting = ", ".join(d.filename for d in documents.values() if d.id not in seen)
                raise click.ClickException(
                    f"still ingesting after {wait_seconds:.0f}s: {waiting} (is a worker running?)"
                )
            await asyncio.sleep(0.25)
        failures = sum(status == "failed" for status in seen.values())
        click.echo(f"{total} documents: {total - failures} ready, {failures} failed", err=True)
        return failures
    finally:
        await pool.close()


@kb.command("search")
@click.argument("knowledge_base")
@click.argument("query")
@click.option("-k", default=5, show_default=True, help="How many chunks.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def search_command(knowledge_base: str, query: str, k: int, as_json: bool) -> None:
    """Search a knowledge base (full text and, with embeddings, vectors)."""
    settings = settings_or_exit()
    url = database_url_or_exit(settings)

    async def work() -> Any:
        from psycopg_pool import AsyncConnectionPool

        from yuxi.knowledge.search import search
        from yuxi.queue.knowledge import kb_find

        pool = AsyncConnectionPool(
            url, min_size=1, max_size=2, open=False, kwargs={"autocommit": True}
        )
        await pool.open()
        try:
            async with pool.connection() as conn:
                kb_id = await kb_find(conn, knowledge_base)
            return await search(pool, None, [kb_id], query, k=k)
        finally:
            await pool.close()

    from yuxi.queue.errors import QueueError

    try:
        hits = asyncio.run(work())
    except QueueError as error:
        raise click.ClickException(str(error)) from None
    if as_json:
        echo_json(hits)
        return
    if not hits:
        click.echo("no match", err=True)
        return
    for n, hit in enumerate(hits, 1):
        click.echo(f"[{n}] {hit.filename} chunk {hit.chunk} (score {hit.score:.4f})")
        click.echo("    " + preview(hit.text, 200))
