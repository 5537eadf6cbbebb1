"""``yuxi model …``: the platform models of the registry (what ``/api/models`` manages):
add, list, remove, and re-seal every stored key under the current server key."""

from __future__ import annotations

import sys
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
def model() -> None:
    """Platform models: the models every user may pick (users add their own, with their
    own keys, through /api/me/models). Keys are sealed under the server key
    (YUXI_SECRET_KEY, or <YUXI_HOME>/secret.key) and never printed."""


@model.command("add")
@click.argument("spec")
@click.option("--name", help="Display name (default: the spec).")
@click.option("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8001/v1.")
@click.option(
    "--api-key-env",
    metavar="VAR",
    help="Read the API key from this environment variable (never from the command line).",
)
@click.option(
    "--api-key-stdin", is_flag=True, help="Read the API key from the first line of stdin."
)
@click.option("--no-streaming", is_flag=True, help="The model cannot stream.")
@click.option("--no-function-calling", is_flag=True, help="The model cannot call tools.")
@click.option("--vision", is_flag=True, help="The model takes images.")
@click.option("--json-mode", is_flag=True, help="The model has a JSON mode.")
@click.option("--context-window", type=click.IntRange(1), help="Tokens of context.")
@click.option("--max-tokens", type=click.IntRange(1), help="Tokens per answer.")
@click.option("--price-in", type=click.FloatRange(0), help="Price per million input tokens.")
@click.option("--price-out", type=click.FloatRange(0), help="Price per million output tokens.")
@click.option("--disabled", is_flag=True, help="Register it disabled.")
def add_command(spec: str, **options: Any) -> None:
    """Register platform model SPEC (provider:model, e.g. openai:gpt-4o-mini)."""
    import uuid

    from yuxi.agents.models import ModelSpecError
    from yuxi.cli.server_key import server_key_or_exit
    from yuxi.models.registry import registry_fields, sealed_key
    from yuxi.queue.models import model_create

    key = _key(options.pop("api_key_env"), options.pop("api_key_stdin"))
    body: dict[str, Any] = {
        "spec": spec,
        "name": options["name"] or spec,
        "base_url": options["base_url"],
        "capabilities": {
            "streaming": not options["no_streaming"],
            "function_calling": not options["no_function_calling"],
            "vision": options["vision"],
            "json_mode": options["json_mode"],
        },
        "context_window": options["context_window"],
        "max_tokens": options["max_tokens"],
        "price_input_per_mtok": options["price_in"],
        "price_output_per_mtok": options["price_out"],
        "enabled": not options["disabled"],
    }
    try:
        fields = registry_fields(body)
    except ModelSpecError as error:
        raise click.ClickException(str(error)) from None
    settings = settings_or_exit()
    box = server_key_or_exit(settings, database_url_or_exit(settings))
    model_id = uuid.uuid4()
    sealed, hint = sealed_key(box, model_id, key)
    row = with_database(
        lambda conn: model_create(conn, model_id, None, fields, sealed=sealed, hint=hint)
    )
    click.echo(f"added {row.spec} ({row.id}){' with a key' if row.has_key else ''}", err=True)


def _key(env: str | None, stdin: bool) -> str | None:
    import os

    if env and stdin:
        raise click.UsageError("give --api-key-env or --api-key-stdin, not both")
    if env:
        value = os.environ.get(env)
        if not value:
            raise click.ClickException(f"environment variable {env} is not set")
        return value
    if stdin:
        value = sys.stdin.readline().strip()
        if not value:
            raise click.ClickException("no API key on stdin")
        return value
    return None


@model.command("list")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def list_command(as_json: bool) -> None:
    """List the platform models, disabled ones included (never a key)."""
    from yuxi.models.registry import model_view
    from yuxi.queue.models import model_list

    rows = [model_view(row) for row in with_database(lambda conn: model_list(conn, None))]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no platform models", err=True)
        return
    echo_table(
        ("SPEC", "NAME", "BASE URL", "KEY", "STREAM", "TOOLS", "VISION", "STATE", "UPDATED"),
        [
            [
                m.spec,
                m.name,
                m.base_url or "-",
                f"…{m.api_key_hint}"
                if m.has_key and m.api_key_hint
                else ("set" if m.has_key else "-"),
                "yes" if m.capabilities.streaming else "no",
                "yes" if m.capabilities.function_calling else "no",
                "yes" if m.capabilities.vision else "no",
                "enabled" if m.enabled else "disabled",
                when(m.updated_at),
            ]
            for m in rows
        ],
    )


@model.command("remove")
@click.argument("spec")
def remove_command(spec: str) -> None:
    """Remove platform model SPEC."""
    from yuxi.queue.models import model_delete, model_list

    async def remove(conn: Any) -> None:
        found = [row for row in await model_list(conn, None) if row.spec == spec]
        if not found:
            raise click.ClickException(f"no platform model {spec}")
        await model_delete(conn, found[0].id, None)

    with_database(remove)
    click.echo(f"removed {spec}", err=True)


@model.command("rekey")
def rekey_command() -> None:
    """Re-seal every stored secret under the current server key: the models' keys
    (platform and users' own) and the MCP servers' headers and env (as ``yuxi mcp rekey``
    does); then the database records the new key.

    For a rotation: set the new YUXI_SECRET_KEY, put the old one in
    YUXI_SECRET_KEY_PREVIOUS, run this, then drop the old key."""
    from yuxi.cli.server_key import rekey_or_exit

    rekey_or_exit()
