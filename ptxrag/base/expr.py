"""Shape expressions in task files: plain arithmetic over dimension names, evaluated without ``eval``."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

from ptxrag.base.errors import TaskInputError

_OPS: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow, ast.Mod: operator.mod,
}  # fmt: skip
_FUNCS: dict[str, Callable[..., float]] = {"min": min, "max": max, "ceil": math.ceil}


class ExpressionError(TaskInputError, ValueError):
    """A task's shape expression is not plain arithmetic over its dimension names."""


def evaluate(expr: str, dims: dict[str, int]) -> float:
    """Arithmetic over dimension names (``2*m*n*k``, ``ceil(n/128)*32``); nothing else is allowed."""

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in dims:
                raise ExpressionError(f"{expr!r}: unknown dimension {node.id!r} (known: {sorted(dims)})")
            return dims[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
            return _FUNCS[node.func.id](*(ev(a) for a in node.args))
        raise ExpressionError(f"{expr!r}: only numbers, dimension names, + - * / // % **, min, max, ceil")

    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise ExpressionError(f"{expr!r}: not an expression ({e.msg})") from None
    return float(ev(tree))
