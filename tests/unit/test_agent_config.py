"""What an agent's stored configuration may hold, the configuration form's options, and
the run's tool approval mode."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from yuxi.agents.base import BaseAgent
from yuxi.agents.chatbot import ChatBotAgent, ChatBotContext
from yuxi.agents.config import AgentConfigError, check_agent_config
from yuxi.agents.context import OPTION_KINDS, BaseContext
from yuxi.agents.subagent import SubAgent


@dataclass(kw_only=True)
class ModeContext(BaseContext):
    mode: str = field(
        default="default", metadata={"name": "Mode", "options": ["default", "strict"]}
    )
    ratio: float = field(default=0.5, metadata={"name": "Ratio", "kind": "number"})
    extras: dict[str, Any] = field(default_factory=dict, metadata={"name": "Extras"})
    secret: str = field(default="", metadata={"configurable": True, "hide": True})


class ModeAgent(BaseAgent):
    backend_id = "mode"
    context_schema = ModeContext


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"context": {}},
        {"context": {"model": "builtin:scripted"}},
        # the agent's default approval mode, read at intake
        {"context": {"tool_approval_mode": "ask"}},
        {"context": {"tool_approval_mode": "auto"}},
        {
            "context": {
                "system_prompt": "Be brief.",
                "tools": ["calculator"],
                "knowledges": None,
                "mcps": [],
                "subagents": ["helper"],
                "summary_threshold": 10,
                "enable_memory": True,
            }
        },
    ],
    ids=str,
)
def test_configurations_of_configurable_fields_pass(config: dict[str, Any]) -> None:
    check_agent_config(ChatBotAgent(), config)


def test_a_custom_context_s_fields_pass() -> None:
    check_agent_config(
        ModeAgent, {"context": {"mode": "strict", "ratio": 2, "extras": {"any": ["thing"]}}}
    )


@pytest.mark.parametrize(
    ("backend", "config", "message"),
    [
        (ChatBotAgent, [], 'config must be an object like {"context": {...}}'),
        (ChatBotAgent, {"context": 5}, 'config must be an object like {"context": {...}}'),
        (
            ChatBotAgent,
            {"context": {}, "extra": 1},
            "unknown key 'extra' in config (known: context)",
        ),
        (ChatBotAgent, {"context": {"foo": 1}}, "unknown key 'foo' in config.context (known: "),
        (
            ChatBotAgent,
            {"context": {"uid": "x"}},
            "key 'uid' in config.context is not configurable",
        ),
        (
            ChatBotAgent,
            {"context": {"tool_approval_mode": "sometimes"}},
            'config.context.tool_approval_mode: "sometimes" is not one of "auto", "ask"',
        ),
        (
            ChatBotAgent,
            {"context": {"tool_approval_mode": None}},
            "config.context.tool_approval_mode: null is not one of",
        ),
        (SubAgent, {"context": {"subagents": []}}, "unknown key 'subagents' in config.context"),
        (
            SubAgent,
            {"context": {"parent_thread_id": "t"}},
            "key 'parent_thread_id' in config.context is not configurable",
        ),
        (
            ModeAgent,
            {"context": {"secret": "s"}},
            "key 'secret' in config.context is not configurable",
        ),
        (
            ChatBotAgent,
            {"context": {"tools": "calculator"}},
            'tools must be a list of strings or null, not "calculator"',
        ),
        (
            ChatBotAgent,
            {"context": {"tools": [1]}},
            "tools must be a list of strings or null, not [1]",
        ),
        (ChatBotAgent, {"context": {"model": None}}, "model must be a string, not null"),
        (
            ChatBotAgent,
            {"context": {"summary_threshold": "10"}},
            "summary_threshold must be an integer",
        ),
        (
            ChatBotAgent,
            {"context": {"summary_threshold": True}},
            "summary_threshold must be an integer",
        ),
        (
            ChatBotAgent,
            {"context": {"enable_memory": 1}},
            "enable_memory must be true or false, not 1",
        ),
        (
            ModeAgent,
            {"context": {"mode": "loose"}},
            'mode: "loose" is not one of "default", "strict"',
        ),
        (ModeAgent, {"context": {"ratio": "half"}}, "ratio must be a number"),
    ],
    ids=str,
)
def test_what_a_run_would_ignore_or_trip_on_is_refused(
    backend: BaseAgent | type[BaseAgent], config: Any, message: str
) -> None:
    with pytest.raises(AgentConfigError) as error:
        check_agent_config(backend, config)
    assert message in str(error.value)
    assert isinstance(error.value, ValueError)


def test_the_refusal_lists_the_known_keys() -> None:
    with pytest.raises(AgentConfigError) as error:
        check_agent_config(ChatBotAgent(), {"context": {"foo": 1}})
    known = str(error.value).split("(known: ")[1].rstrip(")").split(", ")
    assert known == [*ChatBotContext.settable_keys(), "tool_approval_mode"]
    assert "subagents" in known and "uid" not in known


def test_options_fill_the_resource_fields_by_kind() -> None:
    options = {
        "tools": ["calculator", "read_file"],
        "knowledges": [],
        "mcps": [],
        "skills": [],
        "agents": ["helper"],
    }
    assert set(options) == set(OPTION_KINDS)
    items = {item["key"]: item for item in ChatBotContext.get_configurable_items(options)}
    assert items["tools"]["options"] == ["calculator", "read_file"]
    assert items["subagents"]["options"] == ["helper"]
    assert items["knowledges"]["options"] == items["mcps"]["options"] == []
    assert items["skills"]["options"] == []
    assert items["system_prompt"]["options"] is None
    without = {item["key"]: item for item in ChatBotContext.get_configurable_items()}
    assert without["tools"]["options"] is None
    info = ChatBotAgent().get_info(options)
    assert info["configurable_items"] == list(items.values())


def test_fixed_options_are_kept() -> None:
    items = {item["key"]: item for item in ModeContext.get_configurable_items({"text": ["x"]})}
    assert items["mode"]["options"] == ["default", "strict"]
    assert "secret" not in items


@pytest.mark.parametrize(
    ("given", "mode", "asks"),
    [(None, "auto", False), ("", "auto", False), ("auto", "auto", False), ("ask", "ask", True)],
)
def test_the_tool_approval_mode_has_one_writer(given: Any, mode: str, asks: bool) -> None:
    context = ChatBotContext()
    assert (context.tool_approval_mode, context.asks_tool_approval) == ("auto", False)
    context.set_tool_approval_mode(given)
    assert (context.tool_approval_mode, context.asks_tool_approval) == (mode, asks)


def test_an_unknown_tool_approval_mode_is_refused() -> None:
    context = ChatBotContext()
    with pytest.raises(ValueError, match="unknown tool approval mode 'sometimes'"):
        context.set_tool_approval_mode("sometimes")
    assert context.tool_approval_mode == "auto"


def test_the_cli_s_agent_file_is_checked_the_same_way() -> None:
    from yuxi.cli.agents import AgentFileError, parse_agent_file

    def agent_file(context: dict[str, Any]) -> bytes:
        body = {"slug": "x", "name": "X", "backend_id": "chatbot", "config": {"context": context}}
        return json.dumps(body).encode()

    with pytest.raises(AgentFileError, match=re.escape("unknown key 'foo' in config.context")):
        parse_agent_file(agent_file({"foo": 1}))
    assert parse_agent_file(agent_file({"tools": []})).config == {"context": {"tools": []}}
