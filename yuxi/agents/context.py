"""Context: an agent's configuration schema and, prepared, the object one run executes with.

Field metadata drives the configuration form an API client renders
(``get_configurable_items``): ``name``, ``description``, ``options``, ``kind``,
``configurable`` (default True) and ``hide`` (default False). Only configurable fields
are loaded from an agent's stored ``config_json.context``; identity and runtime fields
are set by the worker.

A field's ``kind`` names what its values are. For the resource kinds (``tools``,
``knowledges``, ``mcps``, ``skills``, ``agents``) the ids a client may choose depend on
the database and the user, so the caller passes them to ``get_configurable_items``
and they fill the items' ``options``; a custom field of one of these kinds gets them too.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

ToolApprovalMode = Literal["auto", "ask"]
TOOL_APPROVAL_MODES: tuple[ToolApprovalMode, ...] = ("auto", "ask")
DEFAULT_TOOL_APPROVAL_MODE: ToolApprovalMode = "auto"

# Field kinds whose options are ids the caller reads from the database for a user.
OPTION_KINDS = ("tools", "knowledges", "mcps", "skills", "agents")


def _meta(
    name: str,
    description: str,
    *,
    kind: str = "text",
    options: list[str] | None = None,
    configurable: bool = True,
    hide: bool = False,
) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "kind": kind,
        "options": options,
        "configurable": configurable,
        "hide": hide,
    }


def _runtime(description: str) -> dict[str, Any]:
    return _meta(description, description, kind="runtime", configurable=False, hide=True)


@dataclass
class Resolved:
    """What preparing a run resolved of the resources its agent selected (the kinds of
    yuxi/resources.py); the worker fills it, the graph and the manifest read it."""

    # the knowledge bases the run may search: [{id, name, slug}]
    knowledge_bases: list[dict[str, Any]] = field(default_factory=list)
    # the MCP servers the run connects to: [{id, slug, name, transport, version}], no
    # secrets (the narrowed ``mcps``; skills that depend on a server add it)
    mcp_servers: list[dict[str, Any]] = field(default_factory=list)
    # the tools of those servers, bound by the worker once connected
    mcp_tools: list[Any] = field(default_factory=list)
    # skills (yuxi/skills/run.py): slug → directory of its files (read-only under the
    # file tools' skills/ root; never shown), the skill index and preloaded
    # instructions, the preloaded ones, and what each skill mounts when activated
    skill_roots: dict[str, str] = field(default_factory=dict)
    skills_prompt: str = ""
    preloaded_skills: list[str] = field(default_factory=list)
    skill_mounts: dict[str, dict[str, list[str]]] = field(default_factory=dict)


@dataclass(kw_only=True)
class BaseContext:
    """Fields every agent has. Resource lists: ``None`` = everything the user may use,
    a list = those (∩ what the user may use), ``[]`` = none."""

    system_prompt: str = field(
        default="You are a helpful assistant.",
        metadata=_meta("System prompt", "Instructions the model always sees", kind="prompt"),
    )
    model: str = field(
        default="",
        metadata=_meta(
            "Model", "provider:model, e.g. builtin:scripted or openai:gpt-4o-mini", kind="llm"
        ),
    )
    tools: list[str] | None = field(
        default=None, metadata=_meta("Tools", "Built-in tools the agent may call", kind="tools")
    )
    knowledges: list[str] | None = field(
        default=None,
        metadata=_meta("Knowledge bases", "Knowledge bases the agent may query", kind="knowledges"),
    )
    mcps: list[str] | None = field(
        default=None,
        metadata=_meta("MCP servers", "MCP servers whose tools are enabled", kind="mcps"),
    )
    skills: list[str] | None = field(
        default=None, metadata=_meta("Skills", "Skills the agent may activate", kind="skills")
    )
    preload_skills: list[str] = field(
        default_factory=list,
        metadata=_meta(
            "Preloaded skills",
            "Skills whose instructions are in the prompt from the start",
            kind="skills",
        ),
    )
    required_mcps: list[str] = field(
        default_factory=list,
        metadata=_meta(
            "Required MCP servers",
            "MCP servers the agent cannot work without: a run fails when one is unreachable",
            kind="mcps",
        ),
    )
    summary_threshold: int = field(
        default=120,
        metadata=_meta(
            "Summary threshold",
            "Summarise older history once the conversation has this many messages",
            kind="number",
        ),
    )
    summary_prompt: str = field(
        default="", metadata=_meta("Summary prompt", "Prompt used to summarise", kind="prompt")
    )
    summary_keep_messages: int = field(
        default=20,
        metadata=_meta(
            "Messages kept", "Recent messages kept verbatim after a summary", kind="number"
        ),
    )
    summary_tool_result_token_limit: int = field(
        default=2000,
        metadata=_meta(
            "Tool result preview", "Token limit of a tool result inside a summary", kind="number"
        ),
    )
    max_execution_steps: int = field(
        default=50,
        metadata=_meta(
            "Max steps", "Upper bound on model and tool steps in one run", kind="number"
        ),
    )
    response_format: str = field(
        default="text",
        metadata=_meta(
            "Reply format",
            "json: every reply is one JSON object (the model's JSON mode when it has one)",
            kind="select",
            options=["text", "json"],
        ),
    )
    enable_memory: bool = field(
        default=False,
        metadata=_meta("Memory", "Read the user's agents/MEMORY.md as reference", kind="bool"),
    )

    # Set by the worker for one run; never loaded from stored configuration.
    tool_approval_mode: ToolApprovalMode = field(
        default=DEFAULT_TOOL_APPROVAL_MODE,
        metadata=_runtime("Tool approval mode of this run (auto or ask)"),
    )
    uid: str = field(default="", metadata=_runtime("User id"))
    thread_id: str = field(default="", metadata=_runtime("Conversation id"))
    run_id: str = field(default="", metadata=_runtime("Run id"))
    workdir: str = field(default="", metadata=_runtime("Working directory of the conversation"))
    workspace_prompt: str = field(
        default="", metadata=_runtime("agents/AGENTS.md and agents/USER.md, appended to the prompt")
    )
    memory: str = field(default="", metadata=_runtime("agents/MEMORY.md when enable_memory"))
    attachments: list[dict[str, Any]] = field(
        default_factory=list,
        metadata=_runtime("The conversation's attachments: {path, media_type, bytes}"),
    )
    # the registry's model for ``model`` (its key opened by the worker), None without one
    registered_model: Any = field(
        default=None, repr=False, metadata=_runtime("The registry model the run uses")
    )
    # a subagent's run (a child run, or any run of a subagent agent): no memory, no
    # delegation. Set once by the worker; ask ``yuxi.agents.memory.is_subagent_context``
    is_subagent_runtime: bool = field(default=False, metadata=_runtime("Marks a subagent run"))
    # what preparation resolved of the selected resources (yuxi/resources.py)
    resolved: Resolved = field(
        default_factory=lambda: Resolved(), repr=False, metadata=_runtime("Resolved resources")
    )

    @property
    def _visible_knowledge_bases(self) -> list[dict[str, Any]]:
        """Seed 001's name for the knowledge bases this run may search."""
        return self.resolved.knowledge_bases

    @classmethod
    def configurable_fields(cls) -> list[dataclasses.Field[Any]]:
        return [f for f in dataclasses.fields(cls) if f.metadata.get("configurable", True)]

    @classmethod
    def get_configurable_items(
        cls, options: Mapping[str, Sequence[str]] | None = None
    ) -> list[dict[str, Any]]:
        """The configuration form: one item per visible configurable field.

        ``options`` maps a field kind (``OPTION_KINDS``) to the ids a client may select,
        e.g. ``{"tools": builtin_tool_names(), "agents": [visible subagent slugs]}``; a
        field whose metadata fixes its own ``options`` keeps them.
        """
        items = []
        for f in cls.configurable_fields():
            if f.metadata.get("hide", False):
                continue
            kind = f.metadata.get("kind", "text")
            choices = f.metadata.get("options")
            if choices is None and options is not None and kind in options:
                choices = list(options[kind])
            items.append(
                {
                    "key": f.name,
                    "name": f.metadata.get("name", f.name),
                    "description": f.metadata.get("description", ""),
                    "kind": kind,
                    "type": _type_name(cls, f),
                    "options": choices,
                    "default": _default(f),
                }
            )
        return items

    @classmethod
    def settable_keys(cls) -> list[str]:
        """The keys an agent's stored ``config.context`` may hold, in field order."""
        return [f.name for f in cls.configurable_fields() if not f.metadata.get("hide", False)]

    def update_from_dict(self, config: dict[str, Any]) -> list[str]:
        """Loads the configurable fields present in ``config``; returns the keys ignored
        (unknown, or not configurable). Saving refuses such keys
        (``yuxi.agents.config.check_agent_config``); rows stored before that still load."""
        allowed = set(self.settable_keys())
        ignored = []
        for key, value in config.items():
            if key in allowed:
                setattr(self, key, value)
            else:
                ignored.append(key)
        return ignored

    def set_tool_approval_mode(self, mode: object) -> None:
        """Sets this run's approval mode from the run's input (``None`` or ``""`` means
        the default, ``auto``); the only writer of ``tool_approval_mode``."""
        value = mode or DEFAULT_TOOL_APPROVAL_MODE
        if value not in TOOL_APPROVAL_MODES:
            raise ValueError(
                f"unknown tool approval mode {value!r} (known: {', '.join(TOOL_APPROVAL_MODES)})"
            )
        self.tool_approval_mode = value

    @property
    def asks_tool_approval(self) -> bool:
        """Whether every tool call of this run waits for the user's approval first."""
        return self.tool_approval_mode == "ask"

    def configurable_values(self) -> dict[str, Any]:
        """The values of every configurable field (what a manifest digests)."""
        return {f.name: getattr(self, f.name) for f in self.configurable_fields()}


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _type_name(cls: type, f: dataclasses.Field[Any]) -> str:
    hint = typing.get_type_hints(cls).get(f.name, Any)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = args[0] if len(args) == 1 else hint
        origin = typing.get_origin(hint)
    if origin is list:
        return "list"
    return getattr(hint, "__name__", str(hint))
