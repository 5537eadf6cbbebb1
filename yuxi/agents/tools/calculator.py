"""``calculator``: arithmetic on numbers, by walking the parsed expression (never eval)."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from langchain_core.tools import ToolException, tool

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
