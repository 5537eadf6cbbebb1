"""What the API and the CLI share about registered models: a body's fields as
``yuxi.model_create``/``model_update`` take them, the key sealed for its row, and the
view a client sees (never the key)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from psycopg import AsyncConnection

from yuxi.agents.models import ModelSettings, ModelSpecError, parse_model_spec
from yuxi.agents.models.config import DEFAULT_OPENAI_BASE_URL
from yuxi.models.secret_box import SecretBox
from yuxi.queue.errors import InvalidInput
from yuxi.queue.models import ModelInfo, model_for_user

CAPABILITIES = ("streaming", "function_calling", "vision", "json_mode")
PARAMETERS = (
    "name",
    "base_url",
    "context_window",
    "max_tokens",
    "temperature",
    "top_p",
    "price_input_per_mtok",
    "price_output_per_mtok",
    "price_cached_per_mtok",
    "enabled",
)


def registry_fields(body: dict[str, Any]) -> dict[str, Any]:
    """A model body (``{spec, name, base_url?, capabilities?: {...}, ...}``, only the
    fields given) as the SQL functions' ``p_fields``. ModelSpecError for a bad spec."""
    fields: dict[str, Any] = {}
    if "spec" in body:
        spec = parse_model_spec(body["spec"])
        if spec.provider == "builtin" and body.get("base_url"):
            raise ModelSpecError(f"{spec} is built in: it takes no base_url")
        fields["spec"] = str(spec)
    for name in PARAMETERS:
        if name in body:
            fields[name] = body[name]
    capabilities = body.get("capabilities")
    if capabilities is not None:
        for name in CAPABILITIES:
            if name in capabilities and capabilities[name] is not None:
                fields[name] = capabilities[name]
    for price in ("price_input_per_mtok", "price_output_per_mtok", "price_cached_per_mtok"):
        if fields.get(price) is not None:
            fields[price] = str(fields[price])  # numeric, exactly as given
    return fields


async def check_model_usable(conn: AsyncConnection[Any], uid: UUID, spec: str) -> None:
    """ModelSpecError (400 ``invalid_model``) unless ``uid`` may run ``spec``: a model of
    the registry (their own, else the platform's) that is enabled; a built-in model; or,
    with no registry entry, an ``openai:`` model of the endpoint the environment
    configures (``YUXI_OPENAI_BASE_URL`` or an API key)."""
    parsed = parse_model_spec(spec)
    row = await model_for_user(conn, uid, str(parsed))
    if row is not None:
        if not row.enabled:
            raise ModelSpecError(f"model {parsed} is disabled")
        return
    if parsed.provider == "builtin":
        return
    settings = ModelSettings.from_env()
    configured = settings.openai_api_key is not None or (
        settings.openai_base_url.rstrip("/") != DEFAULT_OPENAI_BASE_URL
    )
    if not configured:
        raise ModelSpecError(
            f"model {parsed} is not registered (GET /api/models lists the models you may use)"
        )


def key_hint(key: str) -> str:
    """The key's last 4 characters; nothing for a key shorter than 12 (a hint must not
    give away a large part of it)."""
    return key[-4:] if len(key) >= 12 else ""


def sealed_key(box: SecretBox, model_id: UUID, key: str | None) -> tuple[bytes | None, str | None]:
    """``key`` sealed for the row ``model_id`` and its hint; (None, None) for no key."""
    if key is None:
        return None, None
    if not key.strip() or any(c.isspace() for c in key) or len(key) > 1000:
        raise InvalidInput("api_key must be one word of at most 1000 characters")
    return box.seal(key, model_context(model_id)), key_hint(key)


def model_context(model_id: UUID) -> str:
    """What a model's sealed key is bound to."""
    return f"yuxi.models/{model_id}/api_key"


class Capabilities(msgspec.Struct, frozen=True):
    streaming: bool
    function_calling: bool
    vision: bool
    json_mode: bool


class ModelView(msgspec.Struct, frozen=True):
    """A registered model as clients see it: ``owner`` is ``platform`` or ``user``; the
    key shows only as ``has_key`` and ``api_key_hint``."""

    id: UUID
    owner: str
    spec: str
    name: str
    base_url: str | None
    has_key: bool
    api_key_hint: str | None
    capabilities: Capabilities
    context_window: int | None
    max_tokens: int | None
    temperature: float | None
    top_p: float | None
    price_input_per_mtok: float | None
    price_output_per_mtok: float | None
    price_cached_per_mtok: float | None
    enabled: bool
    created_at: datetime
    updated_at: datetime


def model_view(row: ModelInfo) -> ModelView:
    return ModelView(
        id=row.id,
        owner="platform" if row.owner_uid is None else "user",
        spec=row.spec,
        name=row.name,
        base_url=row.base_url,
        has_key=row.has_key,
        api_key_hint=row.api_key_hint,
        capabilities=Capabilities(row.streaming, row.function_calling, row.vision, row.json_mode),
        context_window=row.context_window,
        max_tokens=row.max_tokens,
        temperature=row.temperature,
        top_p=row.top_p,
        price_input_per_mtok=_number(row.price_input_per_mtok),
        price_output_per_mtok=_number(row.price_output_per_mtok),
        price_cached_per_mtok=_number(row.price_cached_per_mtok),
        enabled=row.enabled,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _number(value: Any) -> float | None:
    return None if value is None else float(value)
