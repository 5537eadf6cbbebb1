"""Built-in LangChain tools: the user-selectable catalogue and ``ask_user``.

Every tool reads the run's context through LangGraph's injected ``runtime:
ToolRuntime`` parameter (``runtime.context`` is the run's ``BaseContext``). A tool
failure raises ``ToolException``; the tools set ``handle_tool_error=True`` so the
model receives the error text as the tool result instead of the run failing.

The names in the tool signatures (``ToolRuntime``, ``BaseContext``) must stay
importable at module level, not under ``TYPE_CHECKING``: with postponed annotations
LangChain and LangGraph resolve them with ``typing.get_type_hints`` against this
module's globals to find the injected ``runtime`` argument.
"""

from __future__ import annotations

import ast
import json
import math
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, ToolException, tool
from langgraph.types import interrupt

from yuxi.agents.context import BaseContext

__all__ = [
    "ASK_USER_TOOL",
    "BUILTIN_TOOLS",
    "MAX_LIST_ENTRIES",
    "MAX_READ_BYTES",
    "MAX_WRITE_BYTES",
    "builtin_tool_names",
]

# --------------------------------------------------------------------------- calculator

MAX_EXPRESSION_LENGTH = 1000
MAX_EXPONENT = 10_000
# Integer results (and intermediate values) are limited to this many decimal digits.
MAX_RESULT_DIGITS = 1000
_MAX_INT = 10**MAX_RESULT_DIGITS

_BINARY_OPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY_OPS: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}

_Number = int | float


def _check_magnitude(value: _Number) -> _Number:
    if isinstance(value, complex):
        raise ToolException("the result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolException("the result is too large")
    if isinstance(value, int) and abs(value) >= _MAX_INT:
        raise ToolException(f"the result is too large (more than {MAX_RESULT_DIGITS} digits)")
    return value


def _power(base: _Number, exponent: _Number) -> _Number:
    if abs(exponent) > MAX_EXPONENT:
        raise ToolException(f"the exponent is too large (limit {MAX_EXPONENT})")
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and exponent > 0
        and abs(base) > 1
        and exponent * math.log10(abs(base)) > MAX_RESULT_DIGITS
    ):
        raise ToolException(f"the result is too large (more than {MAX_RESULT_DIGITS} digits)")
    result: _Number = base**exponent
    return result


def _evaluate(node: ast.AST) -> _Number:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ToolException(f"unsupported value {value!r}: only numbers are allowed")
        return _check_magnitude(value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY_OPS:
        operand = _evaluate(node.operand)
        return _check_magnitude(_UNARY_OPS[type(node.op)](operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPS:
        left = _evaluate(node.left)
        right = _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            return _check_magnitude(_power(left, right))
        return _check_magnitude(_BINARY_OPS[type(node.op)](left, right))
    if isinstance(node, ast.Name):
        raise ToolException(f"names are not allowed: {node.id}")
    if isinstance(node, ast.Call):
        raise ToolException("function calls are not allowed")
    if isinstance(node, ast.Attribute):
        raise ToolException("attribute access is not allowed")
    raise ToolException(
        f"unsupported syntax ({type(node).__name__}): only numbers, + - * / // % **,"
        " unary + and -, and parentheses are allowed"
    )


def _format_number(value: _Number) -> str:
    if isinstance(value, int):
        return str(value)
    if value == 0:
        return "0"  # also for -0.0
    # 15 significant digits hide binary noise: 0.1 + 0.2 -> 0.3, 4 / 2 -> 2.
    return f"{value:.15g}"


def evaluate_expression(expression: str) -> str:
    """Evaluates an arithmetic expression; raises ``ToolException`` on any error."""
    text = expression.strip()
    if not text:
        raise ToolException("the expression is empty")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ToolException(
            f"the expression is too long (limit {MAX_EXPRESSION_LENGTH} characters)"
        )
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ToolException(f"invalid expression: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError):
        raise ToolException("invalid expression") from None
    try:
        return _format_number(_evaluate(tree))
    except ZeroDivisionError:
        raise ToolException("division by zero") from None
    except OverflowError:
        raise ToolException("the result is too large") from None
    except RecursionError:
        raise ToolException("the expression is nested too deeply") from None


@tool(parse_docstring=True)
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression and return the result.

    Supports numbers, + - * / // % ** (power), unary + and -, and parentheses only.

    Args:
        expression: The expression, e.g. "(2 + 3) * 4 / 7".
    """
    return evaluate_expression(expression)


# ------------------------------------------------------------------------------- time


@tool(parse_docstring=True)
def get_current_time(timezone: str | None = None) -> str:
    """Return the current date and time in ISO 8601 format.

    Args:
        timezone: IANA time zone name, e.g. "Europe/Paris" or "Asia/Shanghai". Default UTC.
    """
    name = (timezone or "").strip()
    if not name:
        return datetime.now(UTC).isoformat(timespec="seconds")
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ToolException(
            f"unknown time zone {name!r}: use an IANA name such as 'UTC' or 'Europe/Paris'"
        ) from None
    return datetime.now(zone).isoformat(timespec="seconds")


# ------------------------------------------------------------------------------ files

MAX_READ_BYTES = 256 * 1024
MAX_WRITE_BYTES = 4 * 1024 * 1024
MAX_LIST_ENTRIES = 1000


def _workdir(runtime: ToolRuntime[BaseContext], *, create: bool = False) -> Path:
    """The run's working directory, resolved (symlinks followed)."""
    raw = getattr(runtime.context, "workdir", None)
    if not raw:
        raise ToolException(
            "this conversation has no working directory; file tools are unavailable"
        )
    root = Path(raw)
    if create:
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ToolException(
                f"cannot create the conversation's working directory: {exc.strerror}"
            ) from None
    root = root.resolve()
    if not root.is_dir():
        raise ToolException("the conversation's working directory does not exist")
    return root


def _resolve(root: Path, path: str) -> Path:
    """``path`` resolved against ``root``; refused unless it stays inside ``root``.

    Relative paths are taken from ``root``; an absolute path is used as given. ``..``
    and symlinks are resolved before the check, so neither can lead outside.
    """
    if "\x00" in path:
        raise ToolException("invalid path: contains a NUL character")
    try:
        resolved = (root / path).resolve()
    except (OSError, RuntimeError, ValueError):  # e.g. a symlink loop
        raise ToolException(f"cannot resolve path {path}") from None
    if not resolved.is_relative_to(root):
        raise ToolException(f"path {path} is outside the conversation's working directory")
    return resolved


def _display(root: Path, resolved: Path) -> str:
    return resolved.relative_to(root).as_posix()


@tool(parse_docstring=True)
def list_files(runtime: ToolRuntime[BaseContext], path: str = ".") -> str:
    """List a directory of the conversation's working directory, one entry per line.

    Entries are paths relative to the working directory, sorted; directories end with "/".

    Args:
        path: Directory relative to the working directory. Default: the working directory.
    """
    root = _workdir(runtime)
    target = _resolve(root, path)
    if not target.exists():
        raise ToolException(f"no such directory: {path}")
    if not target.is_dir():
        raise ToolException(f"{path} is a file, not a directory; use read_file")
    try:
        children = sorted(target.iterdir(), key=lambda p: p.name)
    except OSError as exc:
        raise ToolException(f"cannot list {path}: {exc.strerror}") from None
    if not children:
        return f"(directory {_display(root, target)} is empty)"
    lines = []
    base = target.relative_to(root)
    for child in children[:MAX_LIST_ENTRIES]:
        name = (base / child.name).as_posix()
        lines.append(f"{name}/" if child.is_dir() else name)
    if len(children) > MAX_LIST_ENTRIES:
        lines.append(f"... and {len(children) - MAX_LIST_ENTRIES} more entries")
    return "\n".join(lines)


def _decode_text(data: bytes, *, truncated: bool) -> str | None:
    """UTF-8 text of ``data``, or None if it is not text. A truncated tail may end
    inside a multi-byte character; that partial character is dropped."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if truncated and exc.start >= len(data) - 3:
            try:
                return data[: exc.start].decode("utf-8")
            except UnicodeDecodeError:
                return None
        return None


@tool(parse_docstring=True)
def read_file(runtime: ToolRuntime[BaseContext], path: str) -> str:
    """Read a UTF-8 text file of the conversation's working directory.

    Returns at most the first 256 KiB and says so when the file is longer.

    Args:
        path: File path relative to the working directory.
    """
    root = _workdir(runtime)
    target = _resolve(root, path)
    if not target.exists():
        raise ToolException(f"no such file: {path}")
    if target.is_dir():
        raise ToolException(f"{path} is a directory, not a file; use list_files")
    if not target.is_file():
        raise ToolException(f"{path} is not a regular file")
    try:
        with target.open("rb") as handle:
            size = target.stat().st_size
            data = handle.read(MAX_READ_BYTES + 1)
    except OSError as exc:
        raise ToolException(f"cannot read {path}: {exc.strerror}") from None
    truncated = len(data) > MAX_READ_BYTES
    if truncated:
        data = data[:MAX_READ_BYTES]
    text = _decode_text(data, truncated=truncated)
    if text is None:
        raise ToolException(f"{path} is not a UTF-8 text file")
    if truncated:
        text += (
            f"\n\n[truncated: showing the first {MAX_READ_BYTES} bytes"
            f" of {max(size, MAX_READ_BYTES + 1)} bytes]"
        )
    return text


@tool(parse_docstring=True)
def write_file(runtime: ToolRuntime[BaseContext], path: str, content: str) -> str:
    """Write a UTF-8 text file in the conversation's working directory.

    Replaces the file if it exists; creates missing parent directories.

    Args:
        path: File path relative to the working directory.
        content: The complete new content of the file.
    """
    root = _workdir(runtime, create=True)
    target = _resolve(root, path)
    if target == root or target.is_dir():
        raise ToolException(f"{path} is a directory, not a file")
    data = content.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        raise ToolException(f"content is too large ({len(data)} bytes; limit {MAX_WRITE_BYTES})")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    except OSError as exc:
        raise ToolException(f"cannot write {path}: {exc.strerror}") from None
    return f"wrote {len(data)} bytes to {_display(root, target)}"


# ---------------------------------------------------------------------------- ask_user


@tool(parse_docstring=True)
def ask_user(question: str) -> str:
    """Ask the user a question and wait for the answer.

    Use only when you cannot continue without information from the user.

    Args:
        question: The question, phrased for the user.
    """
    answer = interrupt({"type": "question", "question": question})
    if isinstance(answer, str):
        return answer
    return json.dumps(answer, ensure_ascii=False, default=str)


# --------------------------------------------------------------------------- catalogue

for _tool in (calculator, get_current_time, list_files, read_file, write_file, ask_user):
    _tool.handle_tool_error = True

BUILTIN_TOOLS: dict[str, BaseTool] = {
    t.name: t for t in (calculator, get_current_time, list_files, read_file, write_file)
}
"""The user-selectable built-in tools, by name, in catalogue order."""

ASK_USER_TOOL: BaseTool = ask_user
"""Always available to agents; never subject to tool approval."""


def builtin_tool_names() -> list[str]:
    """Names of the user-selectable built-in tools, in catalogue order."""
    return list(BUILTIN_TOOLS)
