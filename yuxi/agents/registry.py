"""The registry of agent backends, keyed by ``backend_id`` (agents.backend_id in SQL)."""

from __future__ import annotations

from yuxi.agents.base import BaseAgent

_BACKENDS: dict[str, type[BaseAgent]] = {}


class UnknownBackend(LookupError):
    """An agent names a backend this yuxi does not have."""


def register_backend(cls: type[BaseAgent]) -> type[BaseAgent]:
    """Class decorator: makes a backend available by its ``backend_id``."""
    existing = _BACKENDS.get(cls.backend_id)
    if existing is not None and existing is not cls:
        raise ValueError(f"backend {cls.backend_id!r} is already registered by {existing.__name__}")
    _BACKENDS[cls.backend_id] = cls
    return cls


def get_backend(backend_id: str) -> BaseAgent:
    """A new instance of the backend (the built-ins are registered on first use)."""
    _load_builtins()
    try:
        return _BACKENDS[backend_id]()
    except KeyError:
        known = ", ".join(sorted(_BACKENDS)) or "none"
        raise UnknownBackend(f"unknown agent backend {backend_id!r} (known: {known})") from None


def backend_ids() -> list[str]:
    _load_builtins()
    return sorted(_BACKENDS)


def _load_builtins() -> None:
    # imported for their @register_backend side effect
    from yuxi.agents import chatbot, subagent  # noqa: F401
