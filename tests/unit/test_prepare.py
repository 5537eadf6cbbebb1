"""Context preparation: configurable fields, resources, workspace prompts, manifest."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest

from tests.claims import run_claim
from yuxi.agents.chatbot import ChatBotAgent, ChatBotContext
from yuxi.agents.subagent import SubAgent, SubAgentContext
from yuxi.files.layout import user_workspace
from yuxi.files.workspace import ClientPaths, client_path
from yuxi.queue.runs import RunClaim
from yuxi.resources import (
    ListedCatalog,
    ResourceKind,
    narrow,
    narrow_subagents,
    skill_closure,
)
from yuxi.runtime.manifest import build_manifest, canonical_json, manifest_fingerprint
from yuxi.runtime.prepare import prepare_agent_runtime_context


class Catalog(ListedCatalog):
    """An in-memory resource catalog: what each kind (by its Context field) offers this
    user."""

    def __init__(self, **kinds: list[str]) -> None:
        self.kinds = kinds
        self.deps: dict[str, list[str]] = {}

    async def accessible(self, kind: ResourceKind, uid: UUID) -> list[str]:
        return list(self.kinds.get(kind.context_field, []))

    async def skill_dependencies(self, uid: UUID) -> Mapping[str, Sequence[str]]:
        return self.deps


def run_input(config: dict[str, Any], **overrides: Any) -> RunClaim:
    values: dict[str, Any] = {
        "uid": UUID(int=1),
        "agent_config": {"context": config},
        "visible_subagents": ["helper", "researcher"],
    }
    values.update(overrides)
    return run_claim(**values)


CATALOG = Catalog(
    tools=["calculator", "read_file", "write_file"],
    knowledges=["kb1", "kb2"],
    mcps=["m1"],
    skills=["s1", "s2", "s3"],
)


@pytest.mark.parametrize(
    ("selected", "expected"),
    [(None, ["a", "b", "c"]), (["c", "x", "a", "c"], ["c", "a"]), ([], [])],
)
def test_resource_rule(selected: list[str] | None, expected: list[str]) -> None:
    assert narrow(selected, ["a", "b", "c"]) == expected


@pytest.mark.parametrize(
    ("selected", "expected"),
    [(None, ["h", "r"]), ([], ["h", "r"]), (["r", "nope"], ["r"])],
)
def test_subagent_rule(selected: list[str] | None, expected: list[str]) -> None:
    assert narrow_subagents(selected, ["h", "r"]) == expected


def test_skill_closure_follows_dependencies_within_access() -> None:
    deps = {"a": ["b"], "b": ["c", "secret"], "c": ["a"]}
    assert skill_closure(["a"], deps, ["a", "b", "c"]) == ["a", "b", "c"]
    assert skill_closure(["secret"], deps, ["a"]) == []


async def test_every_resource_kind_obeys_the_rules(tmp_path: Path) -> None:
    config = {"tools": ["calculator", "shell"], "knowledges": [], "mcps": None, "subagents": []}
    prepared = await prepare_agent_runtime_context(
        ChatBotAgent(), run_input(config), catalog=CATALOG, home=tmp_path
    )
    context = prepared.context
    assert isinstance(context, ChatBotContext)
    assert context.tools == ["calculator"]  # list ∩ accessible
    assert context.knowledges == []  # explicit empty = none
    assert context.mcps == ["m1"]  # unset = all accessible
    assert context.skills == ["s1", "s2", "s3"]
    assert context.subagents == ["helper", "researcher"]  # empty = all visible


async def test_only_configurable_fields_load_and_the_run_decides_model_and_identity(
    tmp_path: Path,
) -> None:
    config = {
        "model": "openai:from-config",
        "uid": "intruder",
        "workdir": "/etc",
        "nonsense": 1,
        "system_prompt": "Be brief.",
        "max_execution_steps": 7,
    }
    run = run_input(
        config, input_payload={"model_spec": "openai:resolved", "tool_approval_mode": "ask"}
    )
    prepared = await prepare_agent_runtime_context(
        ChatBotAgent(), run, catalog=CATALOG, home=tmp_path
    )
    context = prepared.context
    assert sorted(prepared.ignored_config_keys) == ["nonsense", "uid", "workdir"]
    assert (context.model, context.tool_approval_mode) == ("openai:resolved", "ask")
    assert (context.system_prompt, context.max_execution_steps) == ("Be brief.", 7)
    assert (context.uid, context.thread_id, context.run_id) == (
        str(run.run.uid),
        str(run.run.thread_id),
        str(run.run.run_id),
    )
    assert context.workdir == str(
        user_workspace(tmp_path, str(run.run.uid)) / "threads" / str(run.run.thread_id)
    )
    project = run_input({}, workdir_path="/srv/projects/p1")
    prepared = await prepare_agent_runtime_context(
        ChatBotAgent(), project, catalog=CATALOG, home=tmp_path
    )
    assert prepared.context.workdir == "/srv/projects/p1"


def _write(root: Path, name: str, content: bytes) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


async def test_workspace_prompts_are_appended_and_cut_at_64_kib(tmp_path: Path) -> None:
    run = run_input({})
    workspace = user_workspace(tmp_path, str(run.run.uid))
    _write(workspace, "agents/AGENTS.md", b"Always answer in French.")
    _write(workspace, "agents/USER.md", b"x" * (64 * 1024 + 100))
    _write(workspace, "agents/MEMORY.md", b"my cat is Tom")
    prepared = await prepare_agent_runtime_context(
        ChatBotAgent(), run, catalog=CATALOG, home=tmp_path
    )
    prompt = prepared.context.workspace_prompt
    assert prompt.startswith("Always answer in French.\n\n")
    assert prompt.count("x") == 64 * 1024
    assert prompt.endswith("[agents/USER.md was cut at 64 KiB; the rest is not shown]")
    assert [(f.name, f.bytes_read, f.truncated) for f in prepared.prompt_files] == [
        ("agents/AGENTS.md", 24, False),
        ("agents/USER.md", 64 * 1024, True),
    ]
    assert prepared.context.memory == ""  # enable_memory is off


async def test_memory_is_read_only_when_enabled(tmp_path: Path) -> None:
    run = run_input({"enable_memory": True})
    _write(user_workspace(tmp_path, str(run.run.uid)), "agents/MEMORY.md", b"my cat is Tom")
    prepared = await prepare_agent_runtime_context(
        ChatBotAgent(), run, catalog=CATALOG, home=tmp_path
    )
    assert prepared.context.memory == "my cat is Tom"


@pytest.mark.parametrize(
    ("agent", "run_type"),
    [(SubAgent(), "subagent"), (SubAgent(), "chat"), (ChatBotAgent(), "subagent")],
)
async def test_a_subagent_run_never_reads_the_users_memory(
    tmp_path: Path, agent: ChatBotAgent | SubAgent, run_type: str
) -> None:
    run = run_input({"enable_memory": True}, run_type=run_type, backend_id=agent.backend_id)
    _write(user_workspace(tmp_path, str(run.run.uid)), "agents/MEMORY.md", b"my cat is Tom")
    prepared = await prepare_agent_runtime_context(agent, run, catalog=CATALOG, home=tmp_path)
    assert prepared.context.enable_memory
    assert prepared.context.memory == ""


async def test_missing_unreadable_and_symlinked_files_never_block(tmp_path: Path) -> None:
    run = run_input({})
    workspace = user_workspace(tmp_path, str(run.run.uid))
    (workspace / "agents").mkdir(parents=True)
    outside = tmp_path / "outside.md"
    outside.write_text("secret from outside")
    os.symlink(outside, workspace / "agents/AGENTS.md")
    (workspace / "agents/USER.md").mkdir()  # a directory where a file should be
    prepared = await prepare_agent_runtime_context(
        ChatBotAgent(), run, catalog=CATALOG, home=tmp_path
    )
    assert prepared.context.workspace_prompt == ""
    assert prepared.prompt_files == []


async def test_manifest_is_stable_and_holds_no_prompt_text(tmp_path: Path) -> None:
    config = {"system_prompt": "TOP-SECRET-PROMPT", "tools": ["calculator"]}
    run = run_input(config)
    _write(
        user_workspace(tmp_path, str(run.run.uid)), "agents/AGENTS.md", b"PRIVATE-WORKSPACE-TEXT"
    )
    first = await prepare_agent_runtime_context(ChatBotAgent(), run, catalog=CATALOG, home=tmp_path)
    manifest = build_manifest(first, run)
    text = canonical_json(manifest)
    assert "TOP-SECRET-PROMPT" not in text and "PRIVATE-WORKSPACE-TEXT" not in text
    assert str(run.run.uid) not in text and str(run.run.thread_id) not in text
    assert manifest["version"] == 2
    assert manifest["resources"]["tools"] == ["calculator"]
    assert list(manifest["preloaded"]) == ["agents/AGENTS.md"]

    # another attempt of the same run on another worker derives the same fingerprint
    again = await prepare_agent_runtime_context(ChatBotAgent(), run, catalog=CATALOG, home=tmp_path)
    assert manifest_fingerprint(build_manifest(again, run)) == manifest_fingerprint(manifest)

    # a configuration change, or a workspace prompt change, changes it
    changed = run_input(
        {**config, "system_prompt": "other"}, run_id=run.run.run_id, thread_id=run.run.thread_id
    )
    other = await prepare_agent_runtime_context(
        ChatBotAgent(), changed, catalog=CATALOG, home=tmp_path
    )
    assert manifest_fingerprint(build_manifest(other, changed)) != manifest_fingerprint(manifest)
    _write(user_workspace(tmp_path, str(run.run.uid)), "agents/AGENTS.md", b"edited")
    edited = await prepare_agent_runtime_context(
        ChatBotAgent(), run, catalog=CATALOG, home=tmp_path
    )
    assert manifest_fingerprint(build_manifest(edited, run)) != manifest_fingerprint(manifest)


def test_configurable_items_describe_the_form() -> None:
    items = {item["key"]: item for item in ChatBotContext.get_configurable_items()}
    assert {"system_prompt", "model", "tools", "subagents", "enable_memory"} <= set(items)
    assert not {"uid", "thread_id", "run_id", "workdir", "tool_approval_mode"} & set(items)
    assert items["tools"]["type"] == "list" and items["tools"]["default"] is None
    assert items["max_execution_steps"] == {
        "key": "max_execution_steps",
        "name": "Max steps",
        "description": "Upper bound on model and tool steps in one run",
        "kind": "number",
        "type": "int",
        "options": None,
        "default": 50,
    }
    sub = {item["key"] for item in SubAgentContext.get_configurable_items()}
    assert "subagents" not in sub and "parent_thread_id" not in sub
    assert SubAgent().get_info()["backend_id"] == "subagent"


def test_client_path_is_relative_to_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "workspaces" / "u"
    assert client_path(workspace, workspace / "threads" / "t") == "threads/t"
    assert client_path(workspace, f"{workspace}/projects/p/") == "projects/p"
    assert client_path(workspace, workspace) == "."
    assert client_path(workspace, workspace / ".." / "v") is None
    assert client_path(workspace, "/srv/elsewhere") is None


def test_hidden_paths_keep_only_what_a_client_may_see(tmp_path: Path) -> None:
    home = tmp_path / "home"
    paths = ClientPaths(home, home / "workspaces" / "u", workdir="/srv/data")
    text = (
        f"'{home}/workspaces/u/threads/t/a.txt' '{home}/workspaces/u' "
        f"'{home}/workspaces/u2/x' '{home}/pgdata' '{home}x' '/srv/data/f' '/srv/database'"
    )
    assert paths.hide(text) == (
        "'threads/t/a.txt' '.' '<home>/workspaces/u2/x' '<home>/pgdata' "
        f"'{home}x' '<workdir>/f' '/srv/database'"
    )


async def test_a_child_run_uses_the_conversations_files_and_its_own_thread(
    tmp_path: Path,
) -> None:
    run = run_input({}, run_type="subagent", backend_id="subagent", agent_slug="helper")
    prepared = await prepare_agent_runtime_context(SubAgent(), run, catalog=CATALOG, home=tmp_path)
    context = prepared.context
    assert isinstance(context, SubAgentContext)
    assert context.parent_thread_id == str(run.run.thread_id)
    assert context.file_thread_id == str(run.run.thread_id)
    assert context.skills_thread_id == str(run.run.run_id)  # its own checkpoint thread
    assert context.is_subagent_runtime is True
    # the conversation's workdir, the same as its parent's
    parent = run_input({}, run_id=uuid4(), thread_id=run.run.thread_id)
    parent_context = (
        await prepare_agent_runtime_context(ChatBotAgent(), parent, catalog=CATALOG, home=tmp_path)
    ).context
    assert context.workdir == parent_context.workdir
