"""Model specs, settings from the environment and capability flags."""

from __future__ import annotations

import pytest

from yuxi.agents.models import (
    Capabilities,
    ModelSettings,
    ModelSpec,
    ModelSpecError,
    OpenAICompatibleChatModel,
    ScriptedChatModel,
    load_chat_model,
    model_capabilities,
    parse_model_spec,
)
from yuxi.settings import SettingsError

_ENV = (
    "YUXI_OPENAI_BASE_URL",
    "YUXI_OPENAI_API_KEY",
    "OPENAI_API_KEY",
    "YUXI_MODEL_CAPABILITIES",
    "YUXI_OPENAI_TIMEOUT",
    "YUXI_OPENAI_MAX_RETRIES",
)
KEY = "sk-test-config-5f1c9e0d"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("spec", "provider", "model"),
    [
        ("builtin:scripted", "builtin", "scripted"),
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini"),
        ("openai:llama3:8b", "openai", "llama3:8b"),
        ("  openai:qwen  ", "openai", "qwen"),
    ],
)
def test_parse_valid_specs(spec: str, provider: str, model: str) -> None:
    parsed = parse_model_spec(spec)
    assert parsed == ModelSpec(provider, model)
    assert str(parsed) == f"{provider}:{model}"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "model spec is empty"),
        ("   ", "model spec is empty"),
        ("scripted", "malformed model spec 'scripted'; expected 'provider:model'"),
        (":gpt", "malformed model spec ':gpt'"),
        ("openai:", "malformed model spec 'openai:'"),
        ("openai:gpt 4", "must not contain whitespace"),
        (
            "anthropic:claude",
            "unknown model provider 'anthropic' .*known providers: builtin, openai",
        ),
        ("builtin:gpt-4", "unknown builtin model 'gpt-4' .*available: scripted"),
    ],
)
def test_bad_specs_are_clear_errors(spec: str, message: str) -> None:
    with pytest.raises(ModelSpecError, match=message):
        parse_model_spec(spec)
    with pytest.raises(ValueError, match=message):
        load_chat_model(spec, settings=ModelSettings())


def test_settings_defaults() -> None:
    settings = ModelSettings.from_env()
    assert settings == ModelSettings()
    assert settings.openai_base_url == "https://api.openai.com/v1"
    assert settings.openai_api_key is None
    assert settings.capabilities == {}
    assert settings.request_timeout == 60.0
    assert settings.max_retries == 2


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YUXI_OPENAI_BASE_URL", "http://llm.internal/v1")
    monkeypatch.setenv("YUXI_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ignored")
    monkeypatch.setenv("YUXI_OPENAI_TIMEOUT", "12.5")
    monkeypatch.setenv("YUXI_OPENAI_MAX_RETRIES", "0")
    monkeypatch.setenv(
        "YUXI_MODEL_CAPABILITIES",
        '{"openai:small": {"streaming": false}, "openai:*": {"tool_calling": false}}',
    )
    settings = ModelSettings.from_env()
    assert settings.openai_base_url == "http://llm.internal/v1"
    assert settings.openai_api_key is not None
    assert settings.openai_api_key.get_secret_value() == KEY
    assert (settings.request_timeout, settings.max_retries) == (12.5, 0)
    assert settings.capabilities == {
        "openai:small": Capabilities(streaming=False, tool_calling=True),
        "openai:*": Capabilities(streaming=True, tool_calling=False),
    }


def test_openai_api_key_is_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    key = ModelSettings.from_env().openai_api_key
    assert key is not None
    assert key.get_secret_value() == KEY


def test_settings_never_show_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YUXI_OPENAI_API_KEY", KEY)
    settings = ModelSettings.from_env()
    assert KEY not in repr(settings)
    assert KEY not in str(settings)
    assert hash(settings) == hash(ModelSettings.from_env())


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("YUXI_MODEL_CAPABILITIES", "{nope", "YUXI_MODEL_CAPABILITIES is not valid JSON"),
        ("YUXI_MODEL_CAPABILITIES", "[]", "must be a JSON object"),
        ("YUXI_MODEL_CAPABILITIES", '{"gpt": {}}', "malformed model spec 'gpt'"),
        ("YUXI_MODEL_CAPABILITIES", '{"x:*": {}}', "unknown model provider in 'x:\\*'"),
        ("YUXI_MODEL_CAPABILITIES", '{"openai:m": true}', "must be an object of flags"),
        ("YUXI_MODEL_CAPABILITIES", '{"openai:m": {"stream": false}}', "unknown capability"),
        ("YUXI_MODEL_CAPABILITIES", '{"openai:m": {"streaming": 0}}', "must be true or false"),
        ("YUXI_OPENAI_TIMEOUT", "soon", "YUXI_OPENAI_TIMEOUT must be a number"),
        ("YUXI_OPENAI_TIMEOUT", "-1", "must be a positive number"),
        ("YUXI_OPENAI_MAX_RETRIES", "many", "YUXI_OPENAI_MAX_RETRIES must be an integer"),
        ("YUXI_OPENAI_MAX_RETRIES", "-1", "must not be negative"),
    ],
)
def test_bad_environment_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=message):
        ModelSettings.from_env()


def test_capability_lookup_exact_then_wildcard_then_default() -> None:
    settings = ModelSettings(
        capabilities={
            "openai:exact": Capabilities(streaming=False, tool_calling=True),
            "openai:*": Capabilities(streaming=True, tool_calling=False),
        }
    )
    assert model_capabilities("openai:exact", settings) == Capabilities(False, True)
    assert model_capabilities("openai:other", settings) == Capabilities(True, False)
    assert model_capabilities("builtin:scripted", settings) == Capabilities(True, True)
    with pytest.raises(ModelSpecError):
        model_capabilities("nope", settings)


def test_model_capabilities_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YUXI_MODEL_CAPABILITIES", '{"openai:m": {"streaming": false}}')
    assert model_capabilities("openai:m") == Capabilities(streaming=False, tool_calling=True)


def test_builtin_scripted_honours_capabilities() -> None:
    model = load_chat_model("builtin:scripted", settings=ModelSettings())
    assert isinstance(model, ScriptedChatModel)
    assert (model.disable_streaming, model.tool_calling) == (False, True)
    limited = load_chat_model(
        "builtin:scripted",
        settings=ModelSettings(capabilities={"builtin:scripted": Capabilities(False, False)}),
    )
    assert isinstance(limited, ScriptedChatModel)
    assert (limited.disable_streaming, limited.tool_calling) == (True, False)


def test_openai_model_is_configured_from_settings() -> None:
    settings = ModelSettings(
        openai_base_url="http://127.0.0.1:9/v1",
        openai_api_key=None,
        capabilities={"openai:m": Capabilities(streaming=False, tool_calling=False)},
        request_timeout=7.0,
        max_retries=1,
    )
    model = load_chat_model("openai:m", settings=settings)
    assert isinstance(model, OpenAICompatibleChatModel)
    assert model.model_name == "m"
    assert model.openai_api_base == "http://127.0.0.1:9/v1"
    assert (model.request_timeout, model.max_retries) == (7.0, 1)
    assert model.disable_streaming is True
    assert model.tool_calling is False
    assert model.use_responses_api is False
    full = load_chat_model("openai:other", settings=settings)
    assert isinstance(full, OpenAICompatibleChatModel)
    assert (full.disable_streaming, full.tool_calling) == (False, True)


def test_openai_without_a_key_at_api_openai_com_is_refused() -> None:
    with pytest.raises(
        SettingsError,
        match="openai:gpt-4o needs an API key: register it with one, or set YUXI_OPENAI_API_KEY",
    ):
        load_chat_model("openai:gpt-4o", settings=ModelSettings())


def test_load_chat_model_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YUXI_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("YUXI_MODEL_CAPABILITIES", '{"openai:*": {"streaming": false}}')
    model = load_chat_model("openai:gpt-4o-mini")
    assert isinstance(model, OpenAICompatibleChatModel)
    assert model.disable_streaming is True
    assert KEY not in repr(model)
    assert KEY not in str(model)
