"""The kernel IR: dtypes, hash-consed UOps, the KernelBuilder, the verifier and lowering to a linear op list."""

from __future__ import annotations

from typing import Any

from .builder import BufferRef, Kernel, KernelBuilder
from .dtypes import DType, dtypes
from .ops import Ops
from .uop import KernelError, SymInt, UOp, as_uop, make_alu, sym_eval


def _float_unary(op: Ops, x: Any) -> UOp:
    return make_alu(op, (as_uop(x),))


def exp2(x: Any) -> UOp:
    """2**x (float)."""
    return _float_unary(Ops.EXP2, x)


def log2(x: Any) -> UOp:
    """log2(x) (float); -inf at 0, NaN below."""
    return _float_unary(Ops.LOG2, x)


def sqrt(x: Any) -> UOp:
    return _float_unary(Ops.SQRT, x)


def sin(x: Any) -> UOp:
    return _float_unary(Ops.SIN, x)


def recip(x: Any) -> UOp:
    return _float_unary(Ops.RECIP, x)


def trunc(x: Any) -> UOp:
    return _float_unary(Ops.TRUNC, x)


def exp(x: Any) -> UOp:
    """e**x, as exp2(x * log2(e))."""
    return exp2(as_uop(x) * 1.4426950408889634)


def log(x: Any) -> UOp:
    return log2(x) * 0.6931471805599453


def where(cond: UOp, a: Any, b: Any, dtype: DType | None = None) -> UOp:
    """cond ? a : b, lane-wise; a Python scalar takes the other branch's dtype. With two Python scalars the dtype
    is `dtype`, else int32 for ints, float32 when either is a float, bool for bools (`where(c, 1, 0)`)."""
    if not isinstance(cond, UOp):
        raise KernelError(f"where(): the condition must be a kernel bool value, got {type(cond).__name__}")
    if not isinstance(a, UOp) and not isinstance(b, UOp):
        if dtype is None:
            kinds = {type(a), type(b)}
            dtype = (dtypes.bool if kinds == {bool} else dtypes.float32 if float in kinds else dtypes.int32)
        a = as_uop(a, dtype)
    a = as_uop(a, b.dtype if isinstance(b, UOp) else None)
    b = as_uop(b, a.dtype)
    return make_alu(Ops.WHERE, (cond, a, b))


def maximum(a: Any, b: Any) -> UOp:
    """max(a, b) defined as (a < b) ? b : a (see docs/ir.md for NaN)."""
    return _first(a, b).maximum(b)


def minimum(a: Any, b: Any) -> UOp:
    """min(a, b) defined as (b < a) ? b : a, max's mirror: a NaN in `a` propagates, a NaN in `b` does not."""
    return _first(a, b).minimum(b)


def _first(a: Any, b: Any) -> UOp:
    """`a` as a kernel value (a Python scalar takes b's dtype), keeping the operand order the NaN rule depends on."""
    if isinstance(a, UOp):
        return a
    if not isinstance(b, UOp):
        raise KernelError("maximum()/minimum(): at least one operand must be a kernel value")
    return as_uop(a, b.dtype)


def mulacc(a: UOp, b: Any, c: Any) -> UOp:
    """a * b + c (two roundings, not fused)."""
    return make_alu(Ops.MULACC, (a, as_uop(b, a.dtype), as_uop(c, a.dtype)))


def vectorize(*lanes: Any) -> UOp:
    """Build a vector from 2-16 scalar lanes of one dtype."""
    us = [x for x in lanes if isinstance(x, UOp)]
    if not us:
        raise KernelError("vectorize(): at least one lane must be a kernel value")
    ls = tuple(as_uop(x, us[0].dtype) for x in lanes)
    d = ls[0].dtype
    if any(x.dtype != d for x in ls) or d.count != 1:
        raise KernelError(f"vectorize(): lanes must be scalars of one dtype, got {[x.dtype for x in ls]}", ls[0])
    return UOp(Ops.VECTORIZE, d.vec(len(ls)), ls)


__all__ = ["BufferRef", "DType", "Kernel", "KernelBuilder", "KernelError", "Ops", "SymInt", "UOp", "dtypes",
           "exp", "exp2", "log", "log2", "maximum", "minimum", "mulacc", "recip", "sin", "sqrt", "sym_eval",
           "trunc", "vectorize", "where"]
