"""Agents: context schemas, the BaseAgent abstraction, built-in backends, models, tools.

This package knows nothing about HTTP or the queue. What an agent package needs is
importable from here::

    from yuxi.agents import BaseAgent, BaseContext, build_system_prompt, load_chat_model

The names load on first use: importing the package must not import LangChain, so that
``yuxi --help`` and the operator commands start fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from yuxi.agents.base import BaseAgent
    from yuxi.agents.config import AgentConfigError, check_agent_config
    from yuxi.agents.context import BaseContext
    from yuxi.agents.graph import build_system_prompt
    from yuxi.agents.models import load_chat_model
    from yuxi.agents.registry import UnknownBackend, get_backend

_EXPORTS = {
    "BaseAgent": "yuxi.agents.base",
    "BaseContext": "yuxi.agents.context",
    "build_system_prompt": "yuxi.agents.graph",
    "load_chat_model": "yuxi.agents.models",
    "AgentConfigError": "yuxi.agents.config",
    "check_agent_config": "yuxi.agents.config",
    "UnknownBackend": "yuxi.agents.registry",
    "get_backend": "yuxi.agents.registry",
}

__all__ = [
    "AgentConfigError",
    "BaseAgent",
    "BaseContext",
    "UnknownBackend",
    "build_system_prompt",
    "check_agent_config",
    "get_backend",
    "load_chat_model",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
