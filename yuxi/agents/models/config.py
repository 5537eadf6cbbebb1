"""Model specs, capability flags and provider settings.

A model is named by a spec ``provider:model`` (``builtin:scripted``, ``openai:gpt-4o-mini``).
Provider settings come from the environment; the API key is held as a ``SecretStr`` so it
never shows up in ``repr``/``str`` of the settings, and is only unwrapped to build the
provider client.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import SecretStr

from yuxi.settings import SettingsError

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_REQUEST_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 2

# Models each provider offers; ``None`` means any model name is accepted.
PROVIDER_MODELS: Mapping[str, frozenset[str] | None] = {
    "builtin": frozenset({"scripted"}),
    "openai": None,
}


class ModelSpecError(ValueError):
    """A model spec is malformed or names an unknown provider or model."""


@dataclass(frozen=True)
class ModelSpec:
    """A parsed ``provider:model`` spec."""

    provider: str
    model: str

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}"


def parse_model_spec(spec: str) -> ModelSpec:
    """Parses and validates ``provider:model``.

    The model part may itself contain colons (``openai:llama3:8b`` names model
    ``llama3:8b``), so only the first colon separates the provider.
    Raises ModelSpecError for a malformed spec or an unknown provider/model.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ModelSpecError(
            "model spec is empty; expected 'provider:model', e.g. 'builtin:scripted'"
        )
    provider, sep, model = spec.strip().partition(":")
    if not sep or not provider or not model:
        raise ModelSpecError(
            f"malformed model spec {spec!r}; expected 'provider:model', e.g. 'builtin:scripted'"
        )
    if any(ch.isspace() for ch in provider + model):
        raise ModelSpecError(f"malformed model spec {spec!r}: it must not contain whitespace")
    if provider not in PROVIDER_MODELS:
        known = ", ".join(sorted(PROVIDER_MODELS))
        raise ModelSpecError(
            f"unknown model provider {provider!r} in {spec!r}; known providers: {known}"
        )
    models = PROVIDER_MODELS[provider]
    if models is not None and model not in models:
        raise ModelSpecError(
            f"unknown {provider} model {model!r} in {spec!r}; "
            f"available: {', '.join(sorted(models))}"
        )
    return ModelSpec(provider, model)


@dataclass(frozen=True)
class Capabilities:
    """What a model can do. Consumed, not decorative: a model without ``streaming`` is
    never called through the streaming API, and one without ``tool_calling`` never
    receives tool definitions (it answers in text)."""

    streaming: bool = True
    tool_calling: bool = True
    # images as image content (attachments); a JSON mode for structured output
    vision: bool = False
    json_mode: bool = False


_CAPABILITY_KEYS = frozenset({"streaming", "tool_calling", "vision", "json_mode"})


@dataclass(frozen=True)
class RegisteredModel:
    """A model of the registry (``yuxi.models``) a run resolved to, its key opened by
    the worker (``SecretStr``: never in a repr, a log or an error). ``version`` changes
    with every change of the row, so a cached provider is rebuilt."""

    id: str
    spec: str
    version: str
    byok: bool
    base_url: str | None = None
    api_key: SecretStr | None = field(default=None, repr=False)
    capabilities: Capabilities = field(default_factory=Capabilities)
    context_window: int | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None

    def snapshot(self) -> dict[str, Any]:
        """What the manifest records of it: everything but the key."""
        return {
            "id": self.id,
            "spec": self.spec,
            "byok": self.byok,
            "base_url": self.base_url,
            "has_key": self.api_key is not None,
            "capabilities": {
                "streaming": self.capabilities.streaming,
                "function_calling": self.capabilities.tool_calling,
                "vision": self.capabilities.vision,
                "json_mode": self.capabilities.json_mode,
            },
            "context_window": self.context_window,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
        }


@dataclass(frozen=True)
class ModelSettings:
    """Provider configuration. Read it with ``ModelSettings.from_env()``.

    ``capabilities`` maps a spec (``openai:some-model``) or a provider wildcard
    (``openai:*``) to its capability flags; unlisted models can do everything.
    """

    openai_base_url: str = DEFAULT_OPENAI_BASE_URL
    # SecretStr: repr/str print '**********', never the key.
    openai_api_key: SecretStr | None = None
    capabilities: Mapping[str, Capabilities] = field(default_factory=dict, hash=False)
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES

    @classmethod
    def from_env(cls) -> ModelSettings:
        """Reads ``YUXI_OPENAI_BASE_URL``, ``YUXI_OPENAI_API_KEY`` (falling back to
        ``OPENAI_API_KEY``), ``YUXI_MODEL_CAPABILITIES`` (a JSON object),
        ``YUXI_OPENAI_TIMEOUT`` (seconds) and ``YUXI_OPENAI_MAX_RETRIES``.

        Raises yuxi.settings.SettingsError naming the variable when a value is unusable.
        """
        key = os.environ.get("YUXI_OPENAI_API_KEY") or os.environ.get("OPENAI_API_KEY")
        return cls(
            openai_base_url=os.environ.get("YUXI_OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL,
            openai_api_key=SecretStr(key) if key else None,
            capabilities=parse_capabilities(os.environ.get("YUXI_MODEL_CAPABILITIES") or "{}"),
            request_timeout=_env_seconds("YUXI_OPENAI_TIMEOUT", DEFAULT_REQUEST_TIMEOUT),
            max_retries=_env_count("YUXI_OPENAI_MAX_RETRIES", DEFAULT_MAX_RETRIES),
        )

    def capabilities_for(self, spec: ModelSpec) -> Capabilities:
        """The flags of ``spec``: an exact entry, else ``provider:*``, else all true."""
        found = self.capabilities.get(str(spec)) or self.capabilities.get(f"{spec.provider}:*")
        return found or Capabilities()


def parse_capabilities(raw: str) -> dict[str, Capabilities]:
    """Parses the ``YUXI_MODEL_CAPABILITIES`` JSON object.

    Unknown flag names are rejected rather than ignored: a typo such as ``"stream"``
    would otherwise silently leave streaming on.
    """
    name = "YUXI_MODEL_CAPABILITIES"
    try:
        data: Any = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{name} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{name} must be a JSON object mapping 'provider:model' to flags")
    result: dict[str, Capabilities] = {}
    for spec, flags in data.items():
        if spec.endswith(":*"):
            provider = spec[:-2]
            if provider not in PROVIDER_MODELS:
                raise SettingsError(f"{name}: unknown model provider in {spec!r}")
        else:
            try:
                parse_model_spec(spec)
            except ModelSpecError as exc:
                raise SettingsError(f"{name}: {exc}") from None
        if not isinstance(flags, dict):
            raise SettingsError(f"{name}: the value of {spec!r} must be an object of flags")
        unknown = set(flags) - _CAPABILITY_KEYS
        if unknown:
            raise SettingsError(
                f"{name}: unknown capability {sorted(unknown)[0]!r} for {spec!r}; "
                f"known: {', '.join(sorted(_CAPABILITY_KEYS))}"
            )
        for flag, value in flags.items():
            if not isinstance(value, bool):
                raise SettingsError(f"{name}: {spec!r} {flag} must be true or false")
        result[spec] = Capabilities(**flags)
    return result


def _env_seconds(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number of seconds, got {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise SettingsError(f"{name} must be a positive number of seconds, got {raw!r}")
    return value


def _env_count(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be an integer, got {raw!r}") from None
    if value < 0:
        raise SettingsError(f"{name} must not be negative, got {raw!r}")
    return value
