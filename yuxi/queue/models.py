"""The model registry (``yuxi.model_*``): platform models (``owner`` None) and users'
own (BYOK). Keys travel sealed (yuxi/models/secret_box.py); nothing here sees one in
the clear."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.queue.calls import call_many, call_one, call_scalar, encode_json


class ModelInfo(msgspec.Struct, frozen=True):
    """A row of ``yuxi.model_info``: a registered model without its key."""

    id: UUID
    owner_uid: UUID | None
    spec: str
    name: str
    base_url: str | None
    has_key: bool
    api_key_hint: str | None
    streaming: bool
    function_calling: bool
    vision: bool
    json_mode: bool
    context_window: int | None
    max_tokens: int | None
    temperature: float | None
    top_p: float | None
    price_input_per_mtok: Decimal | None
    price_output_per_mtok: Decimal | None
    price_cached_per_mtok: Decimal | None
    enabled: bool
    created_at: datetime
    updated_at: datetime


class ModelRow(msgspec.Struct, frozen=True):
    """A row of ``yuxi.model_for_user``: what the worker builds a provider from."""

    id: UUID
    owner_uid: UUID | None
    spec: str
    name: str
    base_url: str | None
    api_key_sealed: bytes | None
    streaming: bool
    function_calling: bool
    vision: bool
    json_mode: bool
    context_window: int | None
    max_tokens: int | None
    temperature: float | None
    top_p: float | None
    enabled: bool


_KEY = "p_set_key => %(set_key)s, p_key_sealed => %(sealed)s, p_key_hint => %(hint)s"


async def model_create(
    conn: AsyncConnection[Any],
    model_id: UUID,
    owner: UUID | None,
    fields: dict[str, Any],
    *,
    sealed: bytes | None = None,
    hint: str | None = None,
) -> ModelInfo:
    return await call_one(
        conn,
        ModelInfo,
        "yuxi.model_create(p_id => %(id)s, p_owner => %(owner)s, p_fields => %(fields)s::jsonb,"
        " p_key_sealed => %(sealed)s, p_key_hint => %(hint)s)",
        {
            "id": model_id,
            "owner": owner,
            "fields": encode_json(fields),
            "sealed": sealed,
            "hint": hint,
        },
    )


async def model_update(
    conn: AsyncConnection[Any],
    model_id: UUID,
    owner: UUID | None,
    fields: dict[str, Any],
    *,
    set_key: bool = False,
    sealed: bytes | None = None,
    hint: str | None = None,
) -> ModelInfo:
    """Changes the fields present (None clears one) and, with ``set_key``, the key."""
    return await call_one(
        conn,
        ModelInfo,
        "yuxi.model_update(p_id => %(id)s, p_owner => %(owner)s, p_fields => %(fields)s::jsonb, "
        + _KEY
        + ")",
        {
            "id": model_id,
            "owner": owner,
            "fields": encode_json(fields),
            "set_key": set_key,
            "sealed": sealed,
            "hint": hint,
        },
    )


async def model_delete(conn: AsyncConnection[Any], model_id: UUID, owner: UUID | None) -> None:
    await call_scalar(
        conn,
        "SELECT yuxi.model_delete(p_id => %(id)s, p_owner => %(owner)s)",
        {"id": model_id, "owner": owner},
    )


async def model_get(conn: AsyncConnection[Any], model_id: UUID, owner: UUID | None) -> ModelInfo:
    return await call_one(
        conn,
        ModelInfo,
        "yuxi.model_get(p_id => %(id)s, p_owner => %(owner)s)",
        {"id": model_id, "owner": owner},
    )


async def model_list(
    conn: AsyncConnection[Any], owner: UUID | None, *, enabled_only: bool = False
) -> list[ModelInfo]:
    return await call_many(
        conn,
        ModelInfo,
        "yuxi.model_list(p_owner => %(owner)s, p_enabled_only => %(enabled_only)s)",
        {"owner": owner, "enabled_only": enabled_only},
    )


async def model_for_user(conn: AsyncConnection[Any], uid: UUID, spec: str) -> ModelRow | None:
    """The registry row ``spec`` names for ``uid`` (their own first), or None."""
    rows = await call_many(
        conn,
        ModelRow,
        "yuxi.model_for_user(p_uid => %(uid)s, p_spec => %(spec)s)",
        {"uid": uid, "spec": spec},
    )
    return rows[0] if rows else None


async def model_sealed_keys(conn: AsyncConnection[Any]) -> list[tuple[UUID, bytes]]:
    """Every stored sealed key with its model id (for ``yuxi model rekey``)."""
    cur = await conn.execute("SELECT id, api_key_sealed FROM yuxi.model_sealed_keys()")
    return [(row[0], bytes(row[1])) for row in await cur.fetchall()]


async def model_reseal(conn: AsyncConnection[Any], model_id: UUID, old: bytes, new: bytes) -> bool:
    """Replaces a sealed key if it is still ``old`` (a concurrent change wins)."""
    return bool(
        await call_scalar(
            conn,
            "SELECT yuxi.model_reseal(p_id => %(id)s, p_old => %(old)s, p_new => %(new)s)",
            {"id": model_id, "old": old, "new": new},
        )
    )
