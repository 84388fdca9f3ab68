"""Symbolic ints (expressions over a kernel's vars) compiled once to plain Python functions of the var values,
so a launch evaluates sizes and extents in well under a microsecond instead of walking the graph.

A division whose divisor is not a constant can meet zero at launch (`sizes={"x": "n // (m - 4)"}` with m = 4):
that is a LaunchError naming the expression and the var values, never a raw ZeroDivisionError. Constant
divisors (checked non-zero where the expression is made) keep the unchecked path, so common sizes cost nothing."""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import CodeType

from ..errors import LaunchError
from .ops import Ops
from .uop import UOp, _cdiv, _cmod, sym_eval

_BIN = {Ops.ADD: "({} + {})", Ops.SUB: "({} - {})", Ops.MUL: "({} * {})", Ops.IDIV: "_cdiv({}, {})",
        Ops.MOD: "_cmod({}, {})", Ops.MAX: "max({}, {})", Ops.CMPLT: "({} < {})"}
_SHOWN = {Ops.ADD: "({} + {})", Ops.SUB: "({} - {})", Ops.MUL: "{} * {}", Ops.IDIV: "{} // {}", Ops.MOD: "{} % {}",
          Ops.MAX: "max({}, {})", Ops.CMPLT: "({} < {})"}


def shown(x, limit: int = 200) -> str:
    """`x` (an int or a SymInt) written over its var names, for messages; cut to `limit` characters."""
    if isinstance(x, int):
        return str(x)
    text: dict[UOp, str] = {}
    for u in x.toposort():
        if u.op is Ops.CONST:
            text[u] = str(u.arg)
        elif u.op is Ops.VAR:
            text[u] = str(u.arg[0])
        elif u.op in _SHOWN:
            text[u] = _SHOWN[u.op].format(*(text[s] for s in u.src))
        elif u.op is Ops.NEG:
            text[u] = f"-{text[u.src[0]]}"
        else:
            text[u] = f"{u.op.name.lower()}({', '.join(text[s] for s in u.src)})"
        if len(text[u]) > 4 * limit:
            text[u] = text[u][:limit] + "..."
    s = text[x]
    return s if len(s) <= limit else s[:limit] + "..."


def _divided_by_zero(x, var_names: tuple[str, ...], vals: tuple) -> LaunchError:
    given = ", ".join(f"{n}={v}" for n, v in zip(var_names, vals))
    return LaunchError(f"the size expression {shown(x)} divides by zero for {given or 'these var values'}: choose "
                       "var values for which every divisor is non-zero")


def compile_sym(x, var_names: tuple[str, ...], fallback: int | None = None) -> Callable[[tuple], int]:
    """f(vals) == sym_eval(x, dict(zip(var_names, vals))) for an int or a SymInt `x`. An expression this cannot
    compile is evaluated with sym_eval, or is the constant `fallback` when one is given. A division by zero at
    evaluation is a LaunchError naming the expression and the values."""
    if isinstance(x, int):
        return lambda vals, _x=x: _x
    pos = {n: i for i, n in enumerate(var_names)}
    expr: dict[UOp, str] = {}
    try:
        for u in x.toposort():
            if u.op is Ops.CONST:
                expr[u] = repr(int(u.arg))
            elif u.op is Ops.VAR:
                expr[u] = f"v[{pos[u.arg[0]]}]"
            elif u.op in (Ops.IDIV, Ops.MOD) and not (u.src[1].op is Ops.CONST and u.src[1].arg != 0):
                fn = "_zdiv" if u.op is Ops.IDIV else "_zmod"  # the divisor may be zero: checked
                expr[u] = f"{fn}({expr[u.src[0]]}, {expr[u.src[1]]}, v)"
            elif u.op in _BIN:
                expr[u] = _BIN[u.op].format(*(expr[s] for s in u.src))
            elif u.op is Ops.NEG:
                expr[u] = f"(-{expr[u.src[0]]})"
            elif u.op is Ops.WHERE:
                c, a, b = (expr[s] for s in u.src)
                expr[u] = f"({a} if {c} else {b})"
            else:
                raise KeyError(u.op)
    except KeyError:  # something sym_eval knows and this does not: take the slow path
        if fallback is not None:
            return lambda vals, _f=fallback: _f

        def slow(vals: tuple, _x=x) -> int:
            try:
                return sym_eval(_x, dict(zip(var_names, vals)))
            except ZeroDivisionError:
                raise _divided_by_zero(_x, var_names, vals) from None
        return slow

    def zdiv(a: int, b: int, v: tuple) -> int:
        if b == 0:
            raise _divided_by_zero(x, var_names, v)
        return _cdiv(a, b)

    def zmod(a: int, b: int, v: tuple) -> int:
        if b == 0:
            raise _divided_by_zero(x, var_names, v)
        return _cmod(a, b)

    return eval(_lambda_code(expr[x]),  # our own text
                {"_cdiv": _cdiv, "_cmod": _cmod, "max": max, "_zdiv": zdiv, "_zmod": zmod})


@functools.lru_cache(maxsize=1024)
def _lambda_code(body: str) -> CodeType:
    """`lambda v: body`, compiled once per text: a program's load compiles a few, and kernels of one shape share
    them (~25 us each)."""
    return compile(f"lambda v: {body}", "<devicekit size expression>", "eval")
