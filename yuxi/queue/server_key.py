"""The server key's identifier recorded in the database (``yuxi.server_key_check``,
``yuxi.server_key_rotate``). Only identifiers travel here, never a key."""

from __future__ import annotations

from typing import Any, Literal, cast

from psycopg import AsyncConnection

from yuxi.queue.calls import call_scalar

KeyVerdict = Literal["recorded", "current", "previous", "other"]


async def server_key_check(
    conn: AsyncConnection[Any], key_id: str, previous_ids: list[str]
) -> KeyVerdict:
    """Records ``key_id`` when no identifier is recorded, then says how it compares with
    the recorded one: ``recorded`` (by this call), ``current``, ``previous`` (one of
    ``previous_ids``) or ``other``."""
    verdict = await call_scalar(
        conn,
        "SELECT yuxi.server_key_check(p_key_id => %(key_id)s,"
        " p_previous_ids => %(previous)s::text[])",
        {"key_id": key_id, "previous": previous_ids},
    )
    return cast(KeyVerdict, verdict)


async def server_key_rotate(
    conn: AsyncConnection[Any], key_id: str, previous_ids: list[str]
) -> bool:
    """Records ``key_id`` in place of one of ``previous_ids``; True when it is the
    recorded one now, False when another key's identifier is recorded."""
    return bool(
        await call_scalar(
            conn,
            "SELECT yuxi.server_key_rotate(p_key_id => %(key_id)s,"
            " p_previous_ids => %(previous)s::text[])",
            {"key_id": key_id, "previous": previous_ids},
        )
    )
