"""``load_chat_model``: from a ``provider:model`` spec to a chat model."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import SecretStr

from yuxi.agents.models.config import (
    DEFAULT_OPENAI_BASE_URL,
    Capabilities,
    ModelSettings,
    ModelSpec,
    RegisteredModel,
    parse_model_spec,
)
from yuxi.agents.models.openai_compatible import OpenAICompatibleChatModel
from yuxi.agents.models.scripted import ScriptedChatModel
from yuxi.agents.models.usage import MODEL_RELAY
from yuxi.settings import SettingsError

# Sent when an OpenAI-compatible server other than api.openai.com has no key
# configured: local servers (vLLM, Ollama, llama.cpp) ignore it, and the openai
# client refuses to start without one.
_NO_KEY = "not-configured"


def model_capabilities(spec: str, settings: ModelSettings | None = None) -> Capabilities:
    """The capability flags of ``spec`` (validated) under ``settings``
    (``ModelSettings.from_env()`` when omitted)."""
    parsed = parse_model_spec(spec)
    return (settings or ModelSettings.from_env()).capabilities_for(parsed)


def load_chat_model(
    spec: str,
    *,
    settings: ModelSettings | None = None,
    registered: RegisteredModel | None = None,
    json_replies: bool = False,
) -> BaseChatModel:
    """Builds the chat model named by ``spec`` (``builtin:scripted``, ``openai:MODEL``).

    ``registered``: the registry's model for it (base URL, key, flags, parameters);
    without one the environment's endpoint and ``YUXI_MODEL_CAPABILITIES`` apply.
    ``settings`` defaults to ``ModelSettings.from_env()``. ``json_replies``: the agent
    wants JSON objects; a model with ``json_mode`` is asked for them
    (``response_format: json_object``). Raises ModelSpecError for a
    malformed spec or an unknown provider/model, and yuxi.settings.SettingsError when
    ``openai:*`` targets api.openai.com without an API key.
    """
    parsed = parse_model_spec(spec)
    settings = settings or ModelSettings.from_env()
    capabilities = registered.capabilities if registered else settings.capabilities_for(parsed)
    if parsed.provider == "builtin":
        return ScriptedChatModel(
            disable_streaming=not capabilities.streaming,
            tool_calling=capabilities.tool_calling,
            callbacks=[MODEL_RELAY],
        )
    return _openai(
        parsed, settings, capabilities, registered, json_replies and capabilities.json_mode
    )


def _openai(
    spec: ModelSpec,
    settings: ModelSettings,
    capabilities: Capabilities,
    registered: RegisteredModel | None,
    json_mode: bool = False,
) -> OpenAICompatibleChatModel:
    base_url = settings.openai_base_url
    key = settings.openai_api_key
    extra: dict[str, Any] = {}
    if json_mode:
        extra["model_kwargs"] = {"response_format": {"type": "json_object"}}
    if registered is not None:
        # a user's own model uses their key only; a platform model without a key of
        # its own uses the environment's endpoint key
        base_url = registered.base_url or (DEFAULT_OPENAI_BASE_URL if registered.byok else base_url)
        key = registered.api_key or (None if registered.byok else key)
        for name in ("max_tokens", "temperature", "top_p"):
            if getattr(registered, name) is not None:
                extra[name] = getattr(registered, name)
    if key is None:
        if base_url.rstrip("/") == DEFAULT_OPENAI_BASE_URL:
            raise SettingsError(
                f"{spec} needs an API key: register it with one, or set YUXI_OPENAI_API_KEY"
            )
        key = SecretStr(_NO_KEY)
    return OpenAICompatibleChatModel(
        model=spec.model,
        base_url=base_url,
        api_key=key,
        timeout=settings.request_timeout,
        max_retries=settings.max_retries,
        # Compatible servers implement chat completions; never route to the
        # Responses API, which langchain-openai picks for some model names.
        use_responses_api=False,
        disable_streaming=not capabilities.streaming,
        tool_calling=capabilities.tool_calling,
        spec=str(spec),
        # a compatible server reports a streamed call's tokens only when asked
        stream_usage=True,
        callbacks=[MODEL_RELAY],
        **extra,
    )
