"""Triangular ranges for the reference: a range with a start, or with bounds over other ranges, becomes a box range
plus masks, so the interpreter stays vectorized over rectangular axes.

`k.range(i + 1, n)` inside `i`: for these var values the box is [min start, max end) over the enclosing ranges'
boxes; the range's value is `box_lo + r'` and every access and store under it is gated on `start <= value < end`
(loads read 0, stores do nothing), a reduction over it folds the identity where the mask is off. Compiled devices
run the real loops (`for (j = i + 1; j < n; j++)`); the two agree because a masked lane does nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import semantics
from ..ir.analysis import free_ranges, is_triangular
from ..ir.builder import Kernel
from ..ir.dtypes import dtypes
from ..ir.ops import ALU, Ops
from ..ir.uop import UOp, make_alu


def rectangular(kernel: Kernel, var_vals: dict[str, int]) -> Kernel:
    """The same kernel over box ranges with masks, for these var values (the kernel itself when it has no
    triangular range)."""
    nodes = kernel.sink.toposort()
    if not any(is_triangular(u) for u in nodes):
        return kernel
    ranges = sorted((u for u in nodes if u.op is Ops.RANGE), key=lambda r: r.arg[0])
    axis = {r: n for n, r in enumerate(ranges)}
    grid: dict[UOp, np.ndarray] = {}  # range -> its box as an arange along its own axis
    box: dict[UOp, tuple[int, int]] = {}
    for r in ranges:
        if is_triangular(r):
            lo = 0 if len(r.src) == 1 else _extreme(r.src[0], var_vals, grid, np.min)
            hi = _extreme(r.src[-1], var_vals, grid, np.max)
        else:
            lo, hi = 0, int(_value(r.src[0], var_vals, grid))
        hi = max(lo, hi)
        box[r] = (lo, hi)
        shape = [1] * len(ranges)
        shape[axis[r]] = hi - lo
        grid[r] = np.arange(lo, hi, dtype=np.int64).reshape(shape)
    free = free_ranges(nodes)
    memo: dict[UOp, UOp] = {}
    new_range: dict[UOp, UOp] = {}
    cond: dict[UOp, UOp] = {}
    for u in nodes:
        src = tuple(memo[s] for s in u.src)
        if u.op is Ops.RANGE and is_triangular(u):
            lo, hi = box[u]
            nr = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, hi - lo),), u.arg)
            value = nr if lo == 0 else nr + lo
            start = UOp.const(dtypes.index, 0) if len(src) == 1 else src[0]
            new_range[u], memo[u] = nr, value
            cond[u] = (value >= start) & (value < src[-1])
            continue
        masks = [cond[r] for r in sorted(free[u] & cond.keys(), key=lambda r: r.arg[0])]
        if u.op is Ops.INDEX and masks:
            gate = _all(masks if len(src) == 2 else [src[2], *masks])
            memo[u] = UOp(Ops.INDEX, u.dtype, (src[0], src[1], gate), u.arg)
        elif u.op is Ops.LOAD and len(src) == 1 and len(memo[u.src[0]].src) == 3:
            memo[u] = UOp(Ops.LOAD, u.dtype, (src[0], _const(0, u.dtype)), u.arg)
        elif u.op is Ops.REDUCE:
            red = [r for r in u.src[1:] if r in cond]
            x = src[0]
            if red:
                x = make_alu(Ops.WHERE, (_all([cond[r] for r in red], u.dtype.count), x,
                                         _const(semantics.identity(u.arg, u.dtype), u.dtype)))
            memo[u] = UOp(Ops.REDUCE, u.dtype, (x, *(new_range.get(r, memo[r]) for r in u.src[1:])), u.arg)
        else:
            memo[u] = u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=src)
    return Kernel(kernel.name, memo[kernel.sink], kernel.params, kernel.vars, kernel.param_uops, kernel.var_uops,
                  kernel.checked)


def _all(conds: list[UOp], lanes: int = 1) -> UOp:
    out = conds[0]
    for c in conds[1:]:
        out = out & c
    return out if lanes == 1 else UOp(Ops.VECTORIZE, dtypes.bool.vec(lanes), (out,) * lanes)


def _const(v: Any, dt) -> UOp:
    c = UOp.const(dt.scalar(), v)
    return c if dt.count == 1 else UOp(Ops.VECTORIZE, dt, (c,) * dt.count)


def _value(u: UOp, var_vals: dict[str, int], grid: dict[UOp, np.ndarray]) -> Any:
    """An integer bound expression evaluated with numpy, each range over its box (broadcast along its axis)."""
    if u.op is Ops.CONST:
        return np.int64(u.arg)
    if u.op is Ops.VAR:
        return np.int64(var_vals[u.arg[0]])
    if u.op is Ops.RANGE:
        return grid[u]
    if u.op is Ops.CAST:
        return np.asarray(_value(u.src[0], var_vals, grid)).astype(np.int64)
    if u.op in ALU:
        return semantics.alu(u.op, u.dtype, *(np.asarray(_value(s, var_vals, grid)) for s in u.src))
    raise NotImplementedError(f"range bound: {u.op.name}")


def _extreme(u: UOp, var_vals: dict[str, int], grid: dict[UOp, np.ndarray], fn) -> int:
    v = np.asarray(_value(u, var_vals, grid))
    return int(fn(v)) if v.size else 0
