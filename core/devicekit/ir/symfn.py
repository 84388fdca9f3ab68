"""Symbolic ints (expressions over a kernel's vars) compiled once to plain Python functions of the var values,
so a launch evaluates sizes and extents in well under a microsecond instead of walking the graph."""

from __future__ import annotations

from collections.abc import Callable

from .ops import Ops
from .uop import UOp, _cdiv, _cmod, sym_eval

_BIN = {Ops.ADD: "({} + {})", Ops.SUB: "({} - {})", Ops.MUL: "({} * {})", Ops.IDIV: "_cdiv({}, {})",
        Ops.MOD: "_cmod({}, {})", Ops.MAX: "max({}, {})", Ops.CMPLT: "({} < {})"}


def compile_sym(x, var_names: tuple[str, ...], fallback: int | None = None) -> Callable[[tuple], int]:
    """f(vals) == sym_eval(x, dict(zip(var_names, vals))) for an int or a SymInt `x`. An expression this cannot
    compile is evaluated with sym_eval, or is the constant `fallback` when one is given."""
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
        return lambda vals, _x=x: sym_eval(_x, dict(zip(var_names, vals)))
    return eval(f"lambda v: {expr[x]}", {"_cdiv": _cdiv, "_cmod": _cmod, "max": max})  # our own text
