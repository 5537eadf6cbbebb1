"""Agent backends are found through the ``yuxi.agents`` entry point group: yuxi's own
built-ins, an installed agent package, and broken packages that must not take the
server down."""

from __future__ import annotations

import ast
import importlib.metadata
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.agent_package import install_agent_package, on_sys_path, write_entry_point
from yuxi.agents import BaseAgent, BaseContext, load_chat_model
from yuxi.agents.chatbot import ChatBotAgent
from yuxi.agents.registry import (
    ENTRY_POINT_GROUP,
    UnknownBackend,
    backend_ids,
    backend_load_errors,
    get_backend,
    register_backend,
    unregister_backend,
)
from yuxi.agents.subagent import SubAgent
from yuxi.agents.tools import builtin_tool_names


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip()


def test_the_built_ins_are_entry_points_of_yuxi() -> None:
    entry_points = {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert entry_points["chatbot"].value == "yuxi.agents.chatbot:ChatBotAgent"
    assert entry_points["subagent"].value == "yuxi.agents.subagent:SubAgent"
    assert entry_points["chatbot"].dist is not None
    assert entry_points["chatbot"].dist.name == "yuxi"
    assert {"chatbot", "subagent"} <= set(backend_ids())
    assert type(get_backend("chatbot")) is ChatBotAgent
    assert type(get_backend("subagent")) is SubAgent


ROOT = Path(__file__).resolve().parents[2]


def _source(module: str) -> Path | None:
    path = ROOT.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _yuxi_imports(module: str) -> set[str]:
    """The yuxi modules ``module`` imports, read from its source (at any depth in it)."""
    source = _source(module)
    assert source is not None, module
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("yuxi.") and _source(name)}


def test_the_built_ins_do_not_import_the_registry() -> None:
    seen: set[str] = set()
    pending = ["yuxi.agents.chatbot", "yuxi.agents.subagent"]
    while pending:
        module = pending.pop()
        if module not in seen:
            seen.add(module)
            pending.extend(_yuxi_imports(module))
    assert "yuxi.agents.graph" in seen
    assert "yuxi.agents.registry" not in seen


def test_importing_the_package_loads_no_langchain() -> None:
    loaded = _python(
        "import sys, yuxi.agents, yuxi.agents.registry, yuxi.agents.config,"
        " yuxi.agents.models;"
        " print(sorted(m for m in sys.modules if m.startswith(('langchain', 'langgraph'))))"
    )
    assert loaded == "[]"


def test_the_agent_developer_imports() -> None:
    assert issubclass(ChatBotAgent, BaseAgent)
    assert issubclass(ChatBotAgent.context_schema, BaseContext)
    assert load_chat_model("builtin:scripted") is not None
    with pytest.raises(ImportError):
        exec("from yuxi.agents import no_such_name")


def test_an_installed_agent_package_is_found(tmp_path: Path) -> None:
    assert "example" not in backend_ids()
    with on_sys_path(install_agent_package(tmp_path / "site")):
        agent = get_backend("example")
        assert agent.backend_id == "example"  # the entry point's name
        assert type(agent).__module__ == "yuxi_example_agent.graph"
        info = agent.get_info(options={"tools": builtin_tool_names(), "agents": ["helper"]})
        assert (info["backend_id"], info["name"]) == ("example", "Example agent")
        items = {item["key"]: item for item in info["configurable_items"]}
        assert items["greeting"]["default"] == "Hello"
        assert items["style"]["options"] == ["plain", "loud"]
        assert items["tools"]["options"] == builtin_tool_names()
        assert "subagents" not in items
    assert "example" not in backend_ids()
    with pytest.raises(UnknownBackend, match="unknown agent backend 'example'"):
        get_backend("example")


def test_a_broken_entry_point_leaves_only_its_backend_unknown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    site = tmp_path / "site"
    write_entry_point(site, "missing_module", "missing", "yuxi_no_such_module:Agent")
    write_entry_point(site, "not_an_agent", "notagent", "json:dumps")
    (site / "yuxi_raising_agent.py").write_text("raise RuntimeError('boom at import')\n")
    write_entry_point(site, "raising", "raising", "yuxi_raising_agent:Agent")
    (site / "yuxi_misnamed_agent.py").write_text(
        "from yuxi.agents import BaseAgent\n\n"
        "class Agent(BaseAgent):\n"
        "    backend_id = 'other'\n"
        "    name = 'Misnamed'\n"
    )
    write_entry_point(site, "misnamed", "misnamed", "yuxi_misnamed_agent:Agent")
    with caplog.at_level(logging.ERROR, logger="yuxi.agents"), on_sys_path(site):
        assert {"chatbot", "subagent"} <= set(backend_ids())
        errors = backend_load_errors()
        assert set(errors) == {"missing", "notagent", "raising", "misnamed"}
        for backend_id, reason in (
            ("missing", "ModuleNotFoundError"),
            ("notagent", "is not a subclass of yuxi.agents.BaseAgent"),
            ("raising", "RuntimeError: boom at import"),
            ("misnamed", "declares backend_id 'other'"),
        ):
            with pytest.raises(UnknownBackend, match="failed to load") as error:
                get_backend(backend_id)
            assert reason in str(error.value)
        assert type(get_backend("chatbot")) is ChatBotAgent
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for backend_id in ("missing", "notagent", "raising", "misnamed"):
        assert f"agent backend {backend_id!r}" in logged
    assert backend_load_errors() == {}


def test_a_backend_can_be_registered_in_process() -> None:
    class Probe(BaseAgent):
        backend_id = "probe-registered"
        name = "Probe"

    try:
        assert register_backend(Probe) is Probe
        assert type(get_backend("probe-registered")) is Probe
        assert register_backend(Probe) is Probe  # the same class again is fine
        with pytest.raises(ValueError, match="already registered"):

            class Chatbot(BaseAgent):
                backend_id = "chatbot"

            register_backend(Chatbot)
    finally:
        unregister_backend("probe-registered")
    assert "probe-registered" not in backend_ids()
