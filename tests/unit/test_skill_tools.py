"""The file tools' read-only ``skills/`` root, ``activate_skill``, and the tools a skill
brings staying hidden until it is active."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from tests.fixtures.skills import SKILLS
from tests.unit.test_tools import call, error, ok
from yuxi.agents.context import BaseContext
from yuxi.agents.tools import BUILTIN_TOOLS
from yuxi.agents.tools.skills import activate_skill, gated

list_files = BUILTIN_TOOLS["list_files"]
read_file = BUILTIN_TOOLS["read_file"]
write_file = BUILTIN_TOOLS["write_file"]


@pytest.fixture
def context(tmp_path: Path) -> BaseContext:
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    (workdir / "notes.md").write_text("mine")
    skills = tmp_path / "cache"
    for name in ("report-writer", "writing-style"):
        shutil.copytree(SKILLS / name, skills / name)
    (tmp_path / "secret.txt").write_text("host secret")
    os.symlink(tmp_path / "secret.txt", skills / "report-writer" / "escape.md")
    ctx = BaseContext(workdir=str(workdir))
    ctx.resolved.skill_roots = {n: str(skills / n) for n in ("report-writer", "writing-style")}
    ctx.resolved.skill_mounts = {"report-writer": {"tools": ["calculator"], "mcps": ["files"]}}
    return ctx


def test_skill_files_are_readable_under_skills(context: BaseContext) -> None:
    text = ok(call(read_file, context, path="skills/report-writer/templates/outline.md"))
    assert text.startswith("# Status report")
    assert ok(call(list_files, context, path="skills")) == (
        "skills/report-writer/\nskills/writing-style/"
    )
    listing = ok(call(list_files, context, path="skills/report-writer"))
    assert "skills/report-writer/SKILL.md" in listing.splitlines()
    assert "skills/report-writer/templates/" in listing.splitlines()
    # the workdir's own files are where they were
    assert ok(call(read_file, context, path="notes.md")) == "mine"
    # .. inside skills/ stays among the run's skills
    assert "Writing style" in ok(
        call(read_file, context, path="skills/report-writer/../writing-style/SKILL.md")
    )


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("skills/report-writer/escape.md", "outside"),  # a symlink out of the skill
        ("skills/unknown/SKILL.md", "no skill named unknown"),
        ("skills/report-writer/missing.md", "no such file"),
        ("skills/report-writer/../../../secret.txt", "outside"),
    ],
)
def test_reads_stay_inside_the_skill(context: BaseContext, path: str, message: str) -> None:
    assert message in error(call(read_file, context, path=path))


@pytest.mark.parametrize("path", ["skills/report-writer/SKILL.md", "skills/new.md", "skills"])
def test_writes_under_skills_are_refused(context: BaseContext, path: str) -> None:
    assert "read-only" in error(call(write_file, context, path=path, content="changed"))
    assert "Report writer" in (SKILLS / "report-writer" / "SKILL.md").read_text()


def test_without_skills_a_skills_directory_is_an_ordinary_one(tmp_path: Path) -> None:
    ctx = BaseContext(workdir=str(tmp_path))
    assert "wrote" in ok(call(write_file, ctx, path="skills/x.md", content="x"))
    assert ok(call(read_file, ctx, path="skills/x.md")) == "x"


def test_activation_returns_the_instructions_and_marks_the_skill(context: BaseContext) -> None:
    args: dict[str, Any] = {"name": "report-writer"}
    result = call_command(context, args)
    assert result.update is not None
    assert result.update["active_skills"] == ["report-writer"]
    message = result.update["messages"][0]
    assert isinstance(message, ToolMessage)
    assert "# Report writer" in str(message.content)
    assert "name: report-writer" not in str(message.content)  # no front matter
    assert "skills/report-writer/templates/outline.md" in str(message.content)
    assert "calculator" in str(message.content)
    assert "no skill named 'nope'" in error(call(activate_skill, context, name="nope"))


def call_command(context: BaseContext, args: dict[str, Any]) -> Command[Any]:
    from langchain.tools import ToolRuntime

    runtime = ToolRuntime(
        state={},
        context=context,
        config={},
        stream_writer=lambda _chunk: None,
        tool_call_id="call-1",
        store=None,
    )
    result = activate_skill.invoke(
        {
            "type": "tool_call",
            "name": "activate_skill",
            "args": {**args, "runtime": runtime},
            "id": "call-1",
        }
    )
    assert isinstance(result, Command)
    return result


def test_a_skills_tools_are_hidden_until_it_is_active(context: BaseContext) -> None:
    hidden = gated(context, set())
    assert hidden("calculator") and hidden("files__read") and not hidden("read_file")
    assert not hidden("other__read")
    shown = gated(context, {"report-writer"})
    assert not shown("calculator") and not shown("files__read")


async def test_a_hidden_tool_called_anyway_is_refused(context: BaseContext) -> None:
    from langchain.tools import ToolRuntime
    from langgraph.prebuilt.tool_node import ToolCallRequest

    from yuxi.agents.tools.skills import SkillsMiddleware

    ran: list[str] = []

    async def handler(request: ToolCallRequest) -> ToolMessage:
        ran.append(request.tool_call["name"])
        return ToolMessage("42", tool_call_id="c1", name="calculator")

    def request(state: dict[str, Any]) -> ToolCallRequest:
        runtime = ToolRuntime(
            state=state,
            context=context,
            config={},
            stream_writer=lambda _chunk: None,
            tool_call_id="c1",
            store=None,
        )
        call = {"name": "calculator", "args": {"expression": "6*7"}, "id": "c1"}
        return ToolCallRequest(tool_call=call, tool=None, state=state, runtime=runtime)  # type: ignore[arg-type]

    middleware = SkillsMiddleware()
    refused = await middleware.awrap_tool_call(request({}), handler)
    assert isinstance(refused, ToolMessage) and refused.status == "error"
    assert "call activate_skill first" in str(refused.content)
    assert ran == []
    answered = await middleware.awrap_tool_call(
        request({"active_skills": ["report-writer"]}), handler
    )
    assert isinstance(answered, ToolMessage) and answered.content == "42"
    assert ran == ["calculator"]
