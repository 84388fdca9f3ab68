"""The meaning of every ALU op and cast, as numpy code. The reference device and constant folding both use it,
so what the core folds at compile time is exactly what the oracle computes at run time (docs/ir.md states it in words).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .dtypes import DType, bf16_to_f32, dtypes, f32_to_bf16
from .ops import Ops


def _tdiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (C); division by zero gives 0 (undefined in C: never rely on it)."""
    with np.errstate(all="ignore"):
        zero = b == 0
        bb = np.where(zero, 1, b)
        q = a // bb
        fix = ((a % bb) != 0) & ((a < 0) != (bb < 0))
        return np.where(zero, 0, q + fix.astype(q.dtype))


def _tmod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(b == 0, 0, a - b * _tdiv(a, b)).astype(np.result_type(a, b))


def _shift(fn: Callable, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Shifts use the amount modulo the bit width (what x86/PTX do; amounts >= width are undefined in C)."""
    bits = a.dtype.itemsize * 8
    return fn(a, (b.astype(np.int64) & (bits - 1)).astype(a.dtype))


def _max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(a < b, b, a)  # (a < b) ? b : a — NaN in a propagates, NaN in b does not


_ALU: dict[Ops, Callable[..., np.ndarray]] = {
    Ops.NEG: np.negative, Ops.EXP2: np.exp2, Ops.LOG2: np.log2, Ops.SIN: np.sin, Ops.SQRT: np.sqrt,
    Ops.RECIP: lambda x: np.divide(np.ones((), x.dtype), x), Ops.TRUNC: np.trunc,
    Ops.ADD: np.add, Ops.SUB: np.subtract, Ops.MUL: np.multiply, Ops.FDIV: np.divide,
    Ops.IDIV: _tdiv, Ops.MOD: _tmod, Ops.MAX: _max,
    Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal, Ops.CMPEQ: np.equal,
    Ops.AND: np.bitwise_and, Ops.OR: np.bitwise_or, Ops.XOR: np.bitwise_xor,
    Ops.SHL: lambda a, b: _shift(np.left_shift, a, b), Ops.SHR: lambda a, b: _shift(np.right_shift, a, b),
    Ops.WHERE: np.where, Ops.MULACC: lambda a, b, c: a * b + c,
}


def alu(op: Ops, dtype: DType, *srcs: np.ndarray) -> np.ndarray:
    """op(*srcs) computed as a backend must: in the value dtype (bfloat16 values are float32 arrays rounded to bf16)."""
    with np.errstate(all="ignore"):
        out = np.asarray(_ALU[op](*srcs))
    if dtype.scalar() == dtypes.bfloat16 and op not in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ):
        return round_bf16(out)
    want = dtype.scalar().np_compute
    return out if out.dtype == want else out.astype(want)


def round_bf16(x: np.ndarray) -> np.ndarray:
    return bf16_to_f32(f32_to_bf16(np.asarray(x, np.float32)))


def cast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    """C conversion rules: float->int truncates (out of range: undefined), int->float rounds to nearest even,
    anything->bool is `!= 0`, ints wrap modulo 2**bits."""
    s, d = src.scalar(), dst.scalar()
    with np.errstate(all="ignore"):
        if d.is_bool:
            return x != 0
        if d == dtypes.bfloat16:
            return round_bf16(x.astype(np.float64).astype(np.float32) if not s.is_float else x.astype(np.float32))
        if d.is_int and s.is_float:
            lo, hi = d.min(), d.max()
            t = np.trunc(x.astype(np.float64))
            bad = ~np.isfinite(t) | (t < lo) | (t > hi)
            return np.where(bad, 0, t).astype(d.np)  # undefined in C; the reference says 0
        return x.astype(d.np_compute)


def bitcast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    s, d = src.scalar(), dst.scalar()
    stored = np.ascontiguousarray(f32_to_bf16(x) if s == dtypes.bfloat16 else x.astype(s.np))
    out = stored.view(d.np)
    return bf16_to_f32(out) if d == dtypes.bfloat16 else out


def const_array(value: Any, dtype: DType) -> np.ndarray:
    """A constant as an array of its dtype. A float constant past the dtype's range rounds to +-inf: that is the
    defined value (IEEE rounding of a literal), so numpy's "overflow encountered in cast" is not a warning here."""
    d = dtype.scalar()
    with np.errstate(over="ignore"):
        return np.asarray(round_bf16(np.float32(value)) if d == dtypes.bfloat16 else value, dtype=d.np_compute)


def identity(op: Ops, dtype: DType) -> Any:
    """The start value of a reduction's accumulator."""
    s = dtype.scalar()
    if op is Ops.ADD:
        return 0.0 if s.is_float else 0
    if op is Ops.MUL:
        return 1.0 if s.is_float else 1
    return s.min()  # MAX: -inf for floats, the smallest int otherwise
