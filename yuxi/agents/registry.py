"""The registry of agent backends, keyed by ``backend_id`` (agents.backend_id in SQL).

Backends are found through the Python entry point group ``yuxi.agents``: each entry
point names a backend id and the ``BaseAgent`` subclass behind it. yuxi registers its
built-ins there (``pyproject.toml``), and a package installed next to yuxi registers its
own the same way, so every ``yuxi api`` and ``yuxi worker`` process finds it with no
launcher script. ``register_backend`` adds one programmatically (tests, embedding).

A backend whose entry point fails to load is logged and stays unknown: the server keeps
serving the others, and ``get_backend`` says why that one is missing.
"""

from __future__ import annotations

import importlib.metadata
import logging
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # only for annotations: importing the registry must not import langgraph
    from yuxi.agents.base import BaseAgent

ENTRY_POINT_GROUP = "yuxi.agents"

log = logging.getLogger("yuxi.agents")

_lock = threading.Lock()
_discovered: dict[str, type[BaseAgent]] | None = None
_broken: dict[str, str] = {}
_registered: dict[str, type[BaseAgent]] = {}


class UnknownBackend(LookupError):
    """An agent names a backend this yuxi does not have (or could not load)."""


def register_backend(cls: type[BaseAgent]) -> type[BaseAgent]:
    """Makes ``cls`` available by its ``backend_id`` in this process (usable as a class
    decorator). A backend id is taken once: by an entry point or by a registration."""
    existing = _backends().get(cls.backend_id)
    if existing is not None and existing is not cls:
        raise ValueError(f"backend {cls.backend_id!r} is already registered by {existing.__name__}")
    _registered[cls.backend_id] = cls
    return cls


def unregister_backend(backend_id: str) -> None:
    """Removes a backend added with ``register_backend`` (entry points stay)."""
    _registered.pop(backend_id, None)


def get_backend(backend_id: str) -> BaseAgent:
    """A new instance of the backend; ``UnknownBackend`` names the known ones, or the
    reason the entry point of this one failed to load."""
    cls = _backends().get(backend_id)
    if cls is not None:
        return cls()
    if backend_id in _broken:
        raise UnknownBackend(f"agent backend {backend_id!r} failed to load: {_broken[backend_id]}")
    known = ", ".join(backend_ids()) or "none"
    raise UnknownBackend(f"unknown agent backend {backend_id!r} (known: {known})")


def backend_ids() -> list[str]:
    """The ids of every backend that loaded, sorted."""
    return sorted(_backends())


def backend_load_errors() -> dict[str, str]:
    """Entry points of the ``yuxi.agents`` group that failed to load, with why."""
    _backends()
    return dict(_broken)


def discover_backends() -> list[str]:
    """Reads the ``yuxi.agents`` entry points again (a package installed into a running
    process, tests); returns the backend ids then known."""
    global _discovered
    with _lock:
        _discovered = None
    return backend_ids()


def _backends() -> dict[str, type[BaseAgent]]:
    discovered = _discovered
    if discovered is None:
        discovered = _discover()
    return {**discovered, **_registered}


def _discover() -> dict[str, type[BaseAgent]]:
    global _discovered
    with _lock:
        if _discovered is not None:
            return _discovered
        found: dict[str, type[BaseAgent]] = {}
        _broken.clear()
        for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            _load(entry_point, found)
        _discovered = found
        return found


def _load(entry_point: importlib.metadata.EntryPoint, found: dict[str, type[BaseAgent]]) -> None:
    from yuxi.agents.base import BaseAgent

    name = entry_point.name
    where = f"{entry_point.value} ({_distribution(entry_point)})"
    if name in found:
        if f"{found[name].__module__}:{found[name].__qualname__}" != entry_point.value:
            log.error("agent backend %r from %s ignored: the id is taken", name, where)
        return
    try:
        cls = entry_point.load()
    except Exception as error:  # a broken package must not take the server down
        log.exception("agent backend %r from %s failed to load", name, where)
        _broken[name] = f"{type(error).__name__}: {error}"
        return
    problem = _problem(name, cls, BaseAgent)
    if problem:
        log.error("agent backend %r from %s ignored: %s", name, where, problem)
        _broken[name] = problem
        return
    if "backend_id" not in vars(cls):
        # the entry point's name is the id; a class need not repeat it
        cls.backend_id = name
    found[name] = cls


def _problem(name: str, cls: object, base: type[BaseAgent]) -> str:
    if not isinstance(cls, type) or not issubclass(cls, base):
        return f"{cls!r} is not a subclass of yuxi.agents.BaseAgent"
    declared = vars(cls).get("backend_id")
    if declared is not None and declared != name:
        return f"the class declares backend_id {declared!r}, the entry point {name!r}"
    return ""


def _distribution(entry_point: importlib.metadata.EntryPoint) -> str:
    dist = entry_point.dist
    return f"{dist.name} {dist.version}" if dist is not None else "unknown distribution"
