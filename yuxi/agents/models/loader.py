"""``load_chat_model``: from a ``provider:model`` spec to a chat model."""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel
from pydantic import SecretStr

from yuxi.agents.models.config import (
    DEFAULT_OPENAI_BASE_URL,
    Capabilities,
    ModelSettings,
    ModelSpec,
    parse_model_spec,
)
from yuxi.agents.models.openai_compatible import OpenAICompatibleChatModel
from yuxi.agents.models.scripted import ScriptedChatModel
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


def load_chat_model(spec: str, *, settings: ModelSettings | None = None) -> BaseChatModel:
    """Builds the chat model named by ``spec`` (``builtin:scripted``, ``openai:MODEL``).

    ``settings`` defaults to ``ModelSettings.from_env()``. The model honours the spec's
    capability flags. Raises ModelSpecError for a malformed spec or an unknown
    provider/model, and yuxi.settings.SettingsError when ``openai:*`` targets
    api.openai.com without an API key.
    """
    parsed = parse_model_spec(spec)
    settings = settings or ModelSettings.from_env()
    capabilities = settings.capabilities_for(parsed)
    if parsed.provider == "builtin":
        return ScriptedChatModel(
            disable_streaming=not capabilities.streaming,
            tool_calling=capabilities.tool_calling,
        )
    return _openai(parsed, settings, capabilities)


def _openai(
    spec: ModelSpec, settings: ModelSettings, capabilities: Capabilities
) -> OpenAICompatibleChatModel:
    key = settings.openai_api_key
    if key is None:
        if settings.openai_base_url.rstrip("/") == DEFAULT_OPENAI_BASE_URL:
            raise SettingsError(
                f"{spec} needs an API key: set YUXI_OPENAI_API_KEY (or OPENAI_API_KEY)"
            )
        key = SecretStr(_NO_KEY)
    return OpenAICompatibleChatModel(
        model=spec.model,
        base_url=settings.openai_base_url,
        api_key=key,
        timeout=settings.request_timeout,
        max_retries=settings.max_retries,
        # Compatible servers implement chat completions; never route to the
        # Responses API, which langchain-openai picks for some model names.
        use_responses_api=False,
        disable_streaming=not capabilities.streaming,
        tool_calling=capabilities.tool_calling,
        spec=str(spec),
    )
