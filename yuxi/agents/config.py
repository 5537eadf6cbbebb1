"""An agent's stored configuration (``agents.config_json``): ``{"context": {...}}``.

``check_agent_config`` is what saving an agent runs before it stores anything (the API's
``POST``/``PUT /api/agents``, ``yuxi agent create/update``): every key of
``config.context`` must be a configurable, visible field of the backend's Context, with
a value of the field's type. A key the Context does not have would otherwise be stored
and silently ignored by every run.

One more key is allowed: ``tool_approval_mode``, the agent's default approval mode,
which ``yuxi.request_input`` reads at intake (the request's value first, the system's
default after). It never loads into the Context; the worker sets the run's mode there.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from yuxi.agents.context import TOOL_APPROVAL_MODES, BaseContext

if TYPE_CHECKING:
    # only for annotations: the check must not import langgraph (the CLI uses it)
    from yuxi.agents.base import BaseAgent

SHAPE = 'config must be an object like {"context": {...}}'

# keys of config.context the database reads at intake, with their allowed values
INTAKE_KEYS: dict[str, tuple[str, ...]] = {"tool_approval_mode": TOOL_APPROVAL_MODES}


class AgentConfigError(ValueError):
    """An agent configuration yuxi refuses to store; the message names the key."""


def check_agent_config(backend: BaseAgent | type[BaseAgent], config: object) -> None:
    """Raises ``AgentConfigError`` unless ``config`` is ``{"context": {...}}`` (context
    may be absent) whose keys the backend's Context can load, each with a value of its
    field's type (and one of its fixed ``options``, when the field has some)."""
    if not isinstance(config, Mapping):
        raise AgentConfigError(SHAPE)
    extra = sorted(key for key in config if key != "context")
    if extra:
        raise AgentConfigError(f"unknown key {extra[0]!r} in config (known: context)")
    context = config.get("context", {})
    if not isinstance(context, Mapping):
        raise AgentConfigError(SHAPE)
    schema = backend.context_schema
    fields = {f.name: f for f in dataclasses.fields(schema)}
    settable = schema.settable_keys()
    for key, value in context.items():
        if key in INTAKE_KEYS:
            _check_intake_value(key, value)
            continue
        if key not in settable:
            known = ", ".join([*settable, *INTAKE_KEYS])
            if key in fields:
                raise AgentConfigError(
                    f"key {key!r} in config.context is not configurable (known: {known})"
                )
            raise AgentConfigError(f"unknown key {key!r} in config.context (known: {known})")
        _check_value(schema, fields[key], value)


def _check_intake_value(key: str, value: object) -> None:
    allowed = INTAKE_KEYS[key]
    if value not in allowed:
        raise AgentConfigError(
            f"config.context.{key}: {_shown(value)} is not one of {', '.join(map(_shown, allowed))}"
        )


def _check_value(schema: type[BaseContext], f: dataclasses.Field[Any], value: object) -> None:
    hint = typing.get_type_hints(schema).get(f.name, Any)
    if not _matches(hint, value):
        raise AgentConfigError(
            f"config.context.{f.name} must be {_describe(hint)}, not {_shown(value)}"
        )
    fixed = f.metadata.get("options")
    if fixed is None:
        return
    for chosen in value if isinstance(value, list) else [value]:
        if chosen is not None and chosen not in fixed:
            raise AgentConfigError(
                f"config.context.{f.name}: {_shown(chosen)} is not one of"
                f" {', '.join(map(_shown, fixed))}"
            )


def _matches(hint: Any, value: object) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if origin in (typing.Union, types.UnionType):
        return any(_matches(arg, value) for arg in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        return isinstance(value, list) and all(_matches(item, v) for v in value)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    # a type this check does not know (a dict, a custom class): the backend's concern
    return True


_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
_PLURALS = {str: "strings", int: "integers", float: "numbers", bool: "booleans"}


def _describe(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in typing.get_args(hint))
    if origin is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(hint)))
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        return f"a list of {_PLURALS[item]}" if item in _PLURALS else "a list"
    if hint is type(None):
        return "null"
    return _NAMES.get(hint, getattr(hint, "__name__", str(hint)))


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
