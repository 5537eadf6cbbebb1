"""Chat models by spec: ``load_chat_model("provider:model")``.

Providers: ``builtin`` (model ``scripted``, the deterministic offline test model) and
``openai`` (any model of an OpenAI-compatible endpoint). Capability flags from
``YUXI_MODEL_CAPABILITIES`` change how a model is called; API keys never leave the
provider client.

Spec parsing (``parse_model_spec``, ``ModelSpecError``) loads with the package; the
models themselves load on first use, since ``langchain_openai`` takes over a second to
import and the API's error mapping and request validation need only the spec.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from yuxi.agents.models.config import (
    Capabilities,
    ModelSettings,
    ModelSpec,
    ModelSpecError,
    RegisteredModel,
    parse_model_spec,
)

if TYPE_CHECKING:
    from yuxi.agents.models.loader import load_chat_model, model_capabilities
    from yuxi.agents.models.openai_compatible import (
        ModelProviderError,
        OpenAICompatibleChatModel,
    )
    from yuxi.agents.models.scripted import (
        ASK_USER_TOOL_NAME,
        ScriptedChatModel,
        ScriptedModelError,
    )

_LAZY = {
    "load_chat_model": "yuxi.agents.models.loader",
    "model_capabilities": "yuxi.agents.models.loader",
    "ModelProviderError": "yuxi.agents.models.openai_compatible",
    "OpenAICompatibleChatModel": "yuxi.agents.models.openai_compatible",
    "ASK_USER_TOOL_NAME": "yuxi.agents.models.scripted",
    "ScriptedChatModel": "yuxi.agents.models.scripted",
    "ScriptedModelError": "yuxi.agents.models.scripted",
}

__all__ = [
    "ASK_USER_TOOL_NAME",
    "Capabilities",
    "ModelProviderError",
    "ModelSettings",
    "ModelSpec",
    "ModelSpecError",
    "OpenAICompatibleChatModel",
    "RegisteredModel",
    "ScriptedChatModel",
    "ScriptedModelError",
    "load_chat_model",
    "model_capabilities",
    "parse_model_spec",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
