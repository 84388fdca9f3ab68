"""Result dtypes of ALU ops (the type rules) and conservative value bounds of integer nodes."""

from __future__ import annotations

import weakref
from typing import Any

from .dtypes import DType, dtypes
from .ops import Ops
from .uop import KernelError, UOp, memo_order

_FLOAT_ONLY = {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.TRUNC, Ops.FDIV}
_INT_ONLY = {Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR}
_INT_OR_BOOL = {Ops.AND, Ops.OR, Ops.XOR}


def _bool_of(d: DType) -> DType:
    return dtypes.bool.vec(d.count) if d.count > 1 else dtypes.bool


def alu_dtype(op: Ops, srcs: tuple[UOp, ...]) -> DType:
    """The dtype of op(srcs), or a KernelError naming the offending operands."""
    if op is Ops.WHERE:
        c, a, b = srcs
        if c.dtype.scalar() != dtypes.bool:
            raise KernelError(f"where() condition must be bool, got {c.dtype}", c)
        if a.dtype != b.dtype:
            raise KernelError(f"dtype mismatch in where(): {a.dtype} vs {b.dtype}; cast one side", b)
        return a.dtype
    d = srcs[0].dtype
    for s in srcs[1:]:
        if s.dtype != d:
            raise KernelError(f"dtype mismatch in {op.name}: {d} vs {s.dtype}; cast one operand explicitly", s)
    s = d.scalar()
    if s == dtypes.void:
        raise KernelError(f"{op.name} of a void value (a store is not a value)", srcs[0])
    if op in _FLOAT_ONLY and not s.is_float:
        hint = " (use // for integer division)" if op is Ops.FDIV else ""
        raise KernelError(f"{op.name} needs a float operand, got {d}{hint}", srcs[0])
    if op in _INT_ONLY and not s.is_int:
        raise KernelError(f"{op.name} needs integer operands, got {d}", srcs[0])
    if op in _INT_OR_BOOL and not (s.is_int or s.is_bool):
        raise KernelError(f"{op.name} needs integer or bool operands, got {d}", srcs[0])
    if op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.MULACC) and s.is_bool:
        raise KernelError(f"{op.name} on bool values: use &, |, ^ or cast to an integer type", srcs[0])
    if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ):
        return _bool_of(d)
    return d


_BOUNDS: weakref.WeakKeyDictionary[UOp, tuple[Any, Any]] = weakref.WeakKeyDictionary()


def value_bounds(u: UOp) -> tuple[Any, Any]:
    """Conservative (min, max) of the value of `u` over every execution (ints; floats give +-inf)."""
    if (b := _BOUNDS.get(u)) is not None:
        return b
    for x in memo_order(u, _BOUNDS):
        _BOUNDS[x] = _bounds1(x)
    return _BOUNDS[u]


def _bounds1(u: UOp) -> tuple[Any, Any]:
    d = u.dtype.scalar()
    full = (d.min(), d.max()) if d != dtypes.void else (0, 0)
    if not (d.is_int or d.is_bool):
        return full
    b = [_BOUNDS[s] for s in u.src]
    op = u.op
    if op is Ops.CONST:
        return (u.arg, u.arg)
    if op is Ops.VAR:
        return (u.arg[1], u.arg[2])
    if op is Ops.RANGE:
        lo = b[0][0] if len(b) == 2 else 0
        hi = b[-1][1] - 1
        return (lo, max(lo, hi))
    if op is Ops.SPECIAL:
        return (0, max(0, b[0][1] - 1))
    if op is Ops.DEFINE_ACC or op is Ops.ASSIGN or op is Ops.REDUCE:
        return full
    res: tuple[Any, Any] | None = None
    if op is Ops.ADD:
        res = (b[0][0] + b[1][0], b[0][1] + b[1][1])
    elif op is Ops.SUB:
        res = (b[0][0] - b[1][1], b[0][1] - b[1][0])
    elif op is Ops.MUL:
        c = [x * y for x in b[0] for y in b[1]]
        res = (min(c), max(c))
    elif op is Ops.NEG:
        res = (-b[0][1], -b[0][0])
    elif op is Ops.MAX:
        res = (max(b[0][0], b[1][0]), max(b[0][1], b[1][1]))
    elif op is Ops.IDIV and b[1][0] > 0:
        c = [int(x / y) for x in b[0] for y in b[1]]
        res = (min(c), max(c))
    elif op is Ops.MOD and b[1][0] > 0:
        m = b[1][1] - 1
        res = (0 if b[0][0] >= 0 else -m, m if b[0][1] >= 0 else 0)
        if b[0][0] >= 0 and b[0][1] <= m:
            res = b[0]
    elif op is Ops.AND and (b[0][0] >= 0 or b[1][0] >= 0):
        res = (0, min(x[1] for x in b if x[0] >= 0))
    elif op is Ops.SHR and b[0][0] >= 0 and b[1][0] >= 0:
        res = (b[0][0] >> min(b[1][1], 63), b[0][1] >> b[1][0])
    elif op is Ops.SHL and b[0][0] >= 0 and 0 <= b[1][0] and b[1][1] < d.bits - 1:
        res = (b[0][0] << b[1][0], b[0][1] << b[1][1])
    elif op is Ops.WHERE:
        res = (min(b[1][0], b[2][0]), max(b[1][1], b[2][1]))
    elif op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ):
        res = (False, True)
    elif op is Ops.CAST and (u.src[0].dtype.scalar().is_int or u.src[0].dtype.scalar().is_bool):
        res = (int(b[0][0]), int(b[0][1]))
    if res is None or d.is_bool:
        return full
    if res[0] < full[0] or res[1] > full[1]:  # may wrap: give up
        return full
    return res
