"""Chat models by spec: ``load_chat_model("provider:model")``.

Providers: ``builtin`` (model ``scripted``, the deterministic offline test model) and
``openai`` (any model of an OpenAI-compatible endpoint). Capability flags from
``YUXI_MODEL_CAPABILITIES`` change how a model is called; API keys never leave the
provider client.
"""

from __future__ import annotations

from yuxi.agents.models.config import (
    Capabilities,
    ModelSettings,
    ModelSpec,
    ModelSpecError,
    parse_model_spec,
)
from yuxi.agents.models.loader import load_chat_model, model_capabilities
from yuxi.agents.models.openai_compatible import ModelProviderError, OpenAICompatibleChatModel
from yuxi.agents.models.scripted import ASK_USER_TOOL_NAME, ScriptedChatModel, ScriptedModelError

__all__ = [
    "ASK_USER_TOOL_NAME",
    "Capabilities",
    "ModelProviderError",
    "ModelSettings",
    "ModelSpec",
    "ModelSpecError",
    "OpenAICompatibleChatModel",
    "ScriptedChatModel",
    "ScriptedModelError",
    "load_chat_model",
    "model_capabilities",
    "parse_model_spec",
]
