"""The widened reference: a kernel's float arithmetic in float64, never rounded between operations.

A compiler that may reassociate and assume finite math (WGSL allows both; lavapipe does both) computes neither the
reference's IEEE result at the kernel's precision nor anything fixed: it computes something near the real-number value
of the expression, which float64 approximates. `(x * -1.7e38) * 0` in float32 overflows to inf and gives NaN; folded,
it gives -0, as float64 does. `b - ((a + b) - a)` in float16 is a rounding error term; reassociated, 0, as in float64.
So for such a compiler (`Compiler.reassociates`) the fuzzer accepts a result that matches this reference where it
misses the exact one: docs/ir.md states the rule. Stores and loads keep the buffers' dtypes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.dtypes import DType, dtypes
from ..ir.ops import Ops
from .interpreter import Interpreter, run_kernel

_GIVEN = frozenset({Ops.CONST, Ops.LOAD, Ops.SCALAR, Ops.VAR, Ops.RANGE})  # values read, not computed


class WideInterpreter(Interpreter):
    """The reference interpreter with float16, bfloat16 and float32 values computed and kept in float64. It notes
    whether any computed float value held an inf or NaN (`nonfinite`; lanes a gate or a select leaves unused
    included): where one did, a compiler that assumes finite math may have computed anything from there on."""

    nonfinite = False

    def _eval1(self, u, ctx: dict) -> np.ndarray:
        out = super()._eval1(u, ctx)  # a constant or a load in its own dtype; the arithmetic on them is wide
        if out.dtype.kind == "f" and out.dtype != np.float64:
            out = out.astype(np.float64)
        if out.dtype.kind == "f" and not self.nonfinite and u.op not in _GIVEN and not np.isfinite(out).all():
            self.nonfinite = True
        return out

    def _compute(self, dtype: DType) -> DType:
        return dtypes.float64 if dtype.scalar().is_float else dtype

    def _cast(self, x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
        if dst.scalar().is_float:  # a float result stays wide, whatever it was cast from
            return x.astype(np.float64)
        return super()._cast(x, src, dst)


def evaluate_wide(kernel, arrays: dict[str, Any], var_vals: dict[str, int]) -> dict[str, np.ndarray]:
    """Run `kernel` widened on copies of numpy arrays by name; every param array by name."""
    return evaluate_wide_finite(kernel, arrays, var_vals)[0]


def evaluate_wide_finite(kernel, arrays: dict[str, Any], var_vals: dict[str, int]
                         ) -> tuple[dict[str, np.ndarray], bool]:
    """`evaluate_wide`, and whether every float value it computed on the way was finite (WideInterpreter.nonfinite
    unset): the fuzzer's test for results a finite-math compiler leaves indeterminate (docs/ir.md)."""
    storage = [np.ascontiguousarray(arrays[p.name]).copy().view(np.uint8).reshape(-1) for p in kernel.params]
    interp = run_kernel(kernel, storage, dict(var_vals), WideInterpreter)
    return {p.name: s.view(p.dtype.np) for p, s in zip(kernel.params, storage)}, not interp.nonfinite


__all__ = ["WideInterpreter", "evaluate_wide", "evaluate_wide_finite"]
