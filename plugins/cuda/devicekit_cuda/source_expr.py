"""Size and launch-dim expressions of hand-written kernels: an int, or a string over the int params with + - * // %."""

from __future__ import annotations

import ast
import operator

from devicekit.errors import CompileError
from devicekit.ir.dtypes import dtypes
from devicekit.ir.uop import SymInt, UOp

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod}


def sym(expr, vars_: dict[str, UOp], what: str) -> SymInt:
    if isinstance(expr, bool) or not isinstance(expr, (int, str)):
        raise CompileError(f"{what}: expected an int or an expression string, got {expr!r}")
    if isinstance(expr, int):
        return expr

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
            return n.value
        if isinstance(n, ast.Name):
            if n.id not in vars_:
                raise CompileError(f"{what}: {n.id!r} is not an integer parameter (have: {', '.join(vars_) or 'none'})")
            return vars_[n.id]
        if isinstance(n, ast.BinOp) and type(n.op) in _BINOPS:
            a, b = ev(n.left), ev(n.right)
            if isinstance(a, int) and isinstance(b, int):
                return _BINOPS[type(n.op)](a, b)
            return _BINOPS[type(n.op)](a if isinstance(a, UOp) else UOp.const(dtypes.index, a), b)
        raise CompileError(f"{what}: unsupported expression {expr!r} (use ints, int params, + - * // %)")

    try:
        return ev(ast.parse(expr.strip(), mode="eval"))
    except SyntaxError as e:
        raise CompileError(f"{what}: cannot parse {expr!r}: {e.msg}") from None
