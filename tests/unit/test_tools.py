"""The built-in tools: behaviour, confinement to the workdir, and runtime injection."""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

from yuxi.agents.context import BaseContext
from yuxi.agents.tools import (
    ASK_USER_TOOL,
    BUILTIN_TOOLS,
    MAX_READ_BYTES,
    builtin_tool_names,
)

calculator = BUILTIN_TOOLS["calculator"]
get_current_time = BUILTIN_TOOLS["get_current_time"]
list_files = BUILTIN_TOOLS["list_files"]
read_file = BUILTIN_TOOLS["read_file"]
write_file = BUILTIN_TOOLS["write_file"]


def call(tool: BaseTool, context: Any = None, **args: Any) -> ToolMessage:
    """Invokes ``tool`` as a tool call, the way ToolNode does, with ``context`` as the
    run's context; returns the ToolMessage (status "error" for a ToolException)."""
    func = getattr(tool, "func", None)
    if func is not None and "runtime" in inspect.signature(func).parameters:
        args["runtime"] = ToolRuntime(
            state={},
            context=context,
            config={},
            stream_writer=lambda _chunk: None,
            tool_call_id="call-1",
            store=None,
        )
    message = tool.invoke({"type": "tool_call", "name": tool.name, "args": args, "id": "call-1"})
    assert isinstance(message, ToolMessage)
    return message


def ok(message: ToolMessage) -> str:
    assert message.status == "success", message.content
    assert isinstance(message.content, str)
    return message.content


def error(message: ToolMessage) -> str:
    assert message.status == "error", message.content
    assert isinstance(message.content, str)
    return message.content


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "workdir"
    path.mkdir()
    return path


@pytest.fixture
def ctx(workdir: Path) -> BaseContext:
    return BaseContext(workdir=str(workdir), uid="u1", thread_id="t1", run_id="r1")


# ------------------------------------------------------------------------- catalogue


def test_catalogue() -> None:
    assert builtin_tool_names() == [
        "calculator",
        "get_current_time",
        "list_files",
        "read_file",
        "write_file",
    ]
    assert list(BUILTIN_TOOLS) == builtin_tool_names()
    assert ASK_USER_TOOL.name == "ask_user"
    assert "ask_user" not in BUILTIN_TOOLS
    for tool in [*BUILTIN_TOOLS.values(), ASK_USER_TOOL]:
        assert tool.handle_tool_error is True
        assert tool.description
        # The model never sees the injected runtime argument.
        assert "runtime" not in tool.tool_call_schema.model_json_schema()["properties"]


def test_argument_names_match_the_contract() -> None:
    def props(tool: BaseTool) -> tuple[set[str], set[str]]:
        schema = tool.tool_call_schema.model_json_schema()
        return set(schema["properties"]), set(schema.get("required", []))

    assert props(calculator) == ({"expression"}, {"expression"})
    assert props(get_current_time) == ({"timezone"}, set())
    assert props(list_files) == ({"path"}, set())
    assert props(read_file) == ({"path"}, {"path"})
    assert props(write_file) == ({"path", "content"}, {"path", "content"})
    assert props(ASK_USER_TOOL) == ({"question"}, {"question"})


# ------------------------------------------------------------------------ calculator


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("2+3", "5"),
        ("7/2", "3.5"),
        ("4/2", "2"),
        (" (2 + 3) * 4 ", "20"),
        ("-(3 - 5) * +2", "4"),
        ("7 // 2", "3"),
        ("-7 % 3", "2"),
        ("7.5 % 2", "1.5"),
        ("2 ** 10", "1024"),
        ("2 ** -1", "0.5"),
        ("0.1 + 0.2", "0.3"),
        ("1e3", "1000"),
        ("-0.0", "0"),
        ("2 ** 0.5", "1.4142135623731"),
        ("10 ** 20", "100000000000000000000"),
        ("1_000 * 3", "3000"),
    ],
)
def test_calculator(expression: str, result: str) -> None:
    assert ok(call(calculator, expression=expression)) == result


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("x", "names are not allowed"),
        ("x + 1", "names are not allowed"),
        ("abs(-1)", "function calls are not allowed"),
        ("__import__('os').system('true')", "function calls are not allowed"),
        ("__import__", "names are not allowed"),
        ("(1).real", "attribute access is not allowed"),
        ("().__class__", "attribute access is not allowed"),
        ("'a' * 3", "only numbers"),
        ("True + 1", "only numbers"),
        ("1j * 1j", "only numbers"),
        ("[1, 2]", "unsupported syntax"),
        ("1 < 2", "unsupported syntax"),
        ("1 if 1 else 2", "unsupported syntax"),
        ("lambda: 1", "unsupported syntax"),
        ("3 & 1", "unsupported syntax"),
        ("1 << 10000", "unsupported syntax"),
        ("x := 1", "invalid expression"),
        ("1; 2", "invalid expression"),
        ("2 +", "invalid expression"),
        ("", "empty"),
        ("1" + "+1" * 600, "too long"),
        ("2 ** 100000", "exponent is too large"),
        ("9 ** 9 ** 9", "exponent is too large"),
        ("10 ** 1001", "too large"),
        ("(10 ** 999) * (10 ** 999)", "too large"),
        ("1.5 ** 5000", "too large"),
        ("1e308 * 10", "too large"),
        ("10 ** 999 / 0.5", "too large"),
        ("1 / 0", "division by zero"),
        ("1 // 0", "division by zero"),
        ("1 % 0", "division by zero"),
        ("1.0 / 0.0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("(-8) ** 0.5", "not a real number"),
    ],
)
def test_calculator_refuses(expression: str, fragment: str) -> None:
    assert fragment in error(call(calculator, expression=expression))


def test_calculator_deep_nesting_is_an_error_not_a_crash() -> None:
    message = call(calculator, expression="-" * 990 + "1")
    assert message.content == "1" or "nested too deeply" in error(message)


# ------------------------------------------------------------------------------ time


def test_current_time_defaults_to_utc() -> None:
    for args in ({}, {"timezone": None}, {"timezone": ""}):
        stamp = datetime.fromisoformat(ok(call(get_current_time, **args)))
        assert stamp.utcoffset() == timedelta(0)
        assert abs(stamp - datetime.now(UTC)) < timedelta(minutes=1)


def test_current_time_in_a_zone() -> None:
    stamp = datetime.fromisoformat(ok(call(get_current_time, timezone="Asia/Shanghai")))
    assert stamp.utcoffset() == timedelta(hours=8)
    assert abs(stamp - datetime.now(UTC)) < timedelta(minutes=1)


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "../../etc/passwd", "/etc/localtime"])
def test_current_time_unknown_zone(zone: str) -> None:
    assert "unknown time zone" in error(call(get_current_time, timezone=zone))


# ----------------------------------------------------------------------------- files


def test_write_then_read(ctx: BaseContext, workdir: Path) -> None:
    assert ok(call(write_file, ctx, path="notes/a/b.txt", content="héllo\n")) == (
        "wrote 7 bytes to notes/a/b.txt"
    )
    assert (workdir / "notes/a/b.txt").read_bytes() == "héllo\n".encode()
    assert ok(call(read_file, ctx, path="notes/a/b.txt")) == "héllo\n"
    assert ok(call(read_file, ctx, path="./notes/../notes/a/b.txt")) == "héllo\n"
    # Overwrites.
    assert ok(call(write_file, ctx, path="notes/a/b.txt", content="")) == (
        "wrote 0 bytes to notes/a/b.txt"
    )
    assert ok(call(read_file, ctx, path="notes/a/b.txt")) == ""


def test_absolute_path_inside_the_workdir_is_allowed(ctx: BaseContext, workdir: Path) -> None:
    (workdir / "a.txt").write_text("A")
    assert ok(call(read_file, ctx, path=str(workdir / "a.txt"))) == "A"


def test_list_files(ctx: BaseContext, workdir: Path) -> None:
    (workdir / "b.txt").write_text("b")
    (workdir / "a.txt").write_text("a")
    (workdir / "sub" / "deep").mkdir(parents=True)
    (workdir / "sub" / "z.md").write_text("z")
    (workdir / "empty").mkdir()
    listing = "a.txt\nb.txt\nempty/\nsub/"
    assert ok(call(list_files, ctx)) == listing
    assert ok(call(list_files, ctx, path=".")) == listing
    assert ok(call(list_files, ctx, path="sub")) == "sub/deep/\nsub/z.md"
    assert "empty" in ok(call(list_files, ctx, path="empty"))
    assert "no such directory" in error(call(list_files, ctx, path="missing"))
    assert "not a directory" in error(call(list_files, ctx, path="a.txt"))


def test_empty_workdir_listing(ctx: BaseContext) -> None:
    assert ok(call(list_files, ctx)) == "(directory . is empty)"


def test_read_errors(ctx: BaseContext, workdir: Path) -> None:
    (workdir / "dir").mkdir()
    (workdir / "blob.bin").write_bytes(b"\x89PNG\x00\x01\xff")
    (workdir / "latin1.txt").write_bytes("café".encode("latin-1"))
    assert "no such file: missing.txt" in error(call(read_file, ctx, path="missing.txt"))
    assert "is a directory" in error(call(read_file, ctx, path="dir"))
    assert "not a UTF-8 text file" in error(call(read_file, ctx, path="blob.bin"))
    assert "not a UTF-8 text file" in error(call(read_file, ctx, path="latin1.txt"))


def test_read_truncates_large_files(ctx: BaseContext, workdir: Path) -> None:
    (workdir / "big.txt").write_text("x" * (MAX_READ_BYTES + 100))
    text = ok(call(read_file, ctx, path="big.txt"))
    assert text.startswith("x" * MAX_READ_BYTES + "\n\n[truncated")
    assert f"first {MAX_READ_BYTES} bytes of {MAX_READ_BYTES + 100} bytes" in text


def test_read_truncation_inside_a_multibyte_character(ctx: BaseContext, workdir: Path) -> None:
    # "a" then 2-byte characters: the limit falls in the middle of one.
    (workdir / "big.txt").write_text("a" + "é" * MAX_READ_BYTES)
    text = ok(call(read_file, ctx, path="big.txt"))
    body = text.split("\n\n[truncated", 1)[0]
    assert body == "a" + "é" * ((MAX_READ_BYTES - 1) // 2)


def test_write_errors(ctx: BaseContext, workdir: Path) -> None:
    (workdir / "dir").mkdir()
    (workdir / "file").write_text("f")
    assert "is a directory" in error(call(write_file, ctx, path="dir", content="x"))
    assert "is a directory" in error(call(write_file, ctx, path=".", content="x"))
    assert "cannot write" in error(call(write_file, ctx, path="file/child.txt", content="x"))


def test_write_creates_a_missing_workdir(tmp_path: Path) -> None:
    workdir = tmp_path / "not-yet"
    ctx = BaseContext(workdir=str(workdir))
    assert "does not exist" in error(call(list_files, ctx))
    assert ok(call(write_file, ctx, path="a.txt", content="A")) == "wrote 1 bytes to a.txt"
    assert (workdir / "a.txt").read_text() == "A"


@pytest.mark.parametrize("context", [None, BaseContext()])
def test_file_tools_need_a_workdir(context: Any) -> None:
    for tool, args in [
        (list_files, {}),
        (read_file, {"path": "a.txt"}),
        (write_file, {"path": "a.txt", "content": "x"}),
    ]:
        assert "no working directory" in error(call(tool, context, **args))


# ------------------------------------------------------------------------- confinement


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workdir, holding a secret file."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("secret")
    return path


def _escapes(outside: Path) -> list[str]:
    return [
        "..",
        "../outside/secret.txt",
        "a/../../outside/secret.txt",
        "./../workdir/../outside/secret.txt",
        str(outside / "secret.txt"),
        "/etc/passwd",
        "/",
    ]


def _assert_refused(message: ToolMessage, path: str) -> None:
    assert error(message) == f"path {path} is outside the conversation's working directory"


def test_path_escapes_are_refused(ctx: BaseContext, outside: Path) -> None:
    for path in _escapes(outside):
        _assert_refused(call(read_file, ctx, path=path), path)
        _assert_refused(call(list_files, ctx, path=path), path)
        _assert_refused(call(write_file, ctx, path=path, content="pwned"), path)
    assert (outside / "secret.txt").read_text() == "secret"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_write_escape_creates_nothing_outside(ctx: BaseContext, tmp_path: Path) -> None:
    _assert_refused(call(write_file, ctx, path="../new/dir/x.txt", content="x"), "../new/dir/x.txt")
    assert not (tmp_path / "new").exists()


def test_symlinks_out_of_the_workdir_are_refused(
    ctx: BaseContext, workdir: Path, outside: Path
) -> None:
    (workdir / "dirlink").symlink_to(outside, target_is_directory=True)
    (workdir / "filelink").symlink_to(outside / "secret.txt")
    (workdir / "dangling").symlink_to(outside / "not-yet.txt")

    _assert_refused(call(list_files, ctx, path="dirlink"), "dirlink")
    _assert_refused(call(read_file, ctx, path="dirlink/secret.txt"), "dirlink/secret.txt")
    _assert_refused(call(read_file, ctx, path="filelink"), "filelink")
    _assert_refused(call(write_file, ctx, path="filelink", content="pwned"), "filelink")
    _assert_refused(call(write_file, ctx, path="dirlink/new.txt", content="x"), "dirlink/new.txt")
    _assert_refused(call(write_file, ctx, path="dangling", content="x"), "dangling")

    assert (outside / "secret.txt").read_text() == "secret"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    # The links themselves may be listed; only following them is refused.
    assert ok(call(list_files, ctx)) == "dangling\ndirlink/\nfilelink"


def test_symlinks_inside_the_workdir_are_followed(ctx: BaseContext, workdir: Path) -> None:
    (workdir / "real").mkdir()
    (workdir / "real" / "a.txt").write_text("A")
    (workdir / "alias").symlink_to(workdir / "real", target_is_directory=True)
    assert ok(call(read_file, ctx, path="alias/a.txt")) == "A"
    assert (
        ok(call(write_file, ctx, path="alias/b.txt", content="B")) == "wrote 1 bytes to real/b.txt"
    )


def test_symlink_loop_is_an_error(ctx: BaseContext, workdir: Path) -> None:
    (workdir / "loop").symlink_to(workdir / "loop")
    assert error(call(read_file, ctx, path="loop"))


def test_workdir_itself_behind_a_symlink(tmp_path: Path, workdir: Path) -> None:
    link = tmp_path / "workdir-link"
    link.symlink_to(workdir, target_is_directory=True)
    ctx = BaseContext(workdir=str(link))
    assert ok(call(write_file, ctx, path="a.txt", content="A")) == "wrote 1 bytes to a.txt"
    assert ok(call(read_file, ctx, path="a.txt")) == "A"
    assert ok(call(read_file, ctx, path=str(link / "a.txt"))) == "A"
    _assert_refused(call(read_file, ctx, path="../outside.txt"), "../outside.txt")


# ----------------------------------------------------------- through a LangGraph graph


def _tool_graph(*, checkpointer: InMemorySaver | None = None) -> Any:
    graph = StateGraph(MessagesState, context_schema=BaseContext)
    graph.add_node("tools", ToolNode([*BUILTIN_TOOLS.values(), ASK_USER_TOOL]))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile(checkpointer=checkpointer)


def _tool_messages(messages: Sequence[BaseMessage]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


def test_tool_node_injects_the_runs_workdir(ctx: BaseContext, workdir: Path) -> None:
    (workdir / "in.txt").write_text("from the workdir")
    (workdir / "sub").mkdir()
    # ToolNode runs the calls of one message concurrently: no call depends on another.
    request = AIMessage(
        "",
        tool_calls=[
            {"name": "read_file", "args": {"path": "in.txt"}, "id": "1"},
            {"name": "write_file", "args": {"path": "out/x.txt", "content": "hi"}, "id": "2"},
            {"name": "list_files", "args": {"path": "sub"}, "id": "3"},
            {"name": "read_file", "args": {"path": "../x"}, "id": "4"},
            {"name": "calculator", "args": {"expression": "6*7"}, "id": "5"},
        ],
    )
    result = _tool_graph().invoke({"messages": [request]}, context=ctx)
    replies = _tool_messages(result["messages"])
    assert replies["1"].content == "from the workdir"
    assert replies["2"].content == "wrote 2 bytes to out/x.txt"
    assert replies["3"].content == "(directory sub is empty)"
    assert replies["4"].status == "error"
    assert replies["4"].content == "path ../x is outside the conversation's working directory"
    assert replies["5"].content == "42"
    assert (workdir / "out" / "x.txt").read_text() == "hi"


async def test_tool_node_async(ctx: BaseContext, workdir: Path) -> None:
    request = AIMessage(
        "",
        tool_calls=[{"name": "write_file", "args": {"path": "a.txt", "content": "A"}, "id": "1"}],
    )
    result = await _tool_graph().ainvoke({"messages": [request]}, context=ctx)
    assert _tool_messages(result["messages"])["1"].content == "wrote 1 bytes to a.txt"
    assert (workdir / "a.txt").read_text() == "A"


@pytest.mark.parametrize(
    ("resume", "answer"),
    [("blue", "blue"), ({"color": "blue", "n": 2}, json.dumps({"color": "blue", "n": 2}))],
)
def test_ask_user_interrupts_and_resumes(ctx: BaseContext, resume: Any, answer: str) -> None:
    graph = _tool_graph(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t1"}}
    request = AIMessage(
        "", tool_calls=[{"name": "ask_user", "args": {"question": "Favourite colour?"}, "id": "q"}]
    )
    first = graph.invoke({"messages": [request]}, config, context=ctx)
    [pending] = first["__interrupt__"]
    assert pending.value == {"type": "question", "question": "Favourite colour?"}
    assert not _tool_messages(first["messages"])

    second = graph.invoke(Command(resume=resume), config, context=ctx)
    assert "__interrupt__" not in second
    reply = _tool_messages(second["messages"])["q"]
    assert (reply.status, reply.content) == ("success", answer)


class _ScriptedModel(GenericFakeChatModel):
    """GenericFakeChatModel that accepts (and ignores) bound tools."""

    def bind_tools(
        self, tools: Sequence[Any], **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:  # type: ignore[override]
        return self  # type: ignore[return-value]


def test_create_agent_uses_the_context_workdir(ctx: BaseContext, workdir: Path) -> None:
    model = _ScriptedModel(
        messages=iter(
            [
                AIMessage(
                    "",
                    tool_calls=[
                        {
                            "name": "write_file",
                            "args": {"path": "report.md", "content": "# Report"},
                            "id": "w",
                        }
                    ],
                ),
                AIMessage(
                    "", tool_calls=[{"name": "ask_user", "args": {"question": "OK?"}, "id": "q"}]
                ),
                AIMessage("done"),
            ]
        )
    )
    agent = create_agent(
        model,
        tools=[*BUILTIN_TOOLS.values(), ASK_USER_TOOL],
        context_schema=BaseContext,
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t1"}}
    first = agent.invoke({"messages": [HumanMessage("write a report")]}, config, context=ctx)
    assert (workdir / "report.md").read_text() == "# Report"
    assert _tool_messages(first["messages"])["w"].content == "wrote 8 bytes to report.md"
    assert first["__interrupt__"][0].value == {"type": "question", "question": "OK?"}

    final = agent.invoke(Command(resume="yes"), config, context=ctx)
    assert _tool_messages(final["messages"])["q"].content == "yes"
    assert final["messages"][-1].content == "done"
