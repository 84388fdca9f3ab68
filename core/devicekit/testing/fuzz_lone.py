"""Lone reductions: `o[0] = op(f(x[r], y[r]) for r in [s, n))` with no global range (or one of extent 1), the shape
the CPU runs as two stages across its threads (devicekit_cpu/split_reduce.py). The other generators always reduce
per lane of a global range, so none of them reached that rewrite (issue 36: the class-fixing rule).

Sizes run from 0 to past the CPU's threading threshold (1.1M elements), as a var or a constant, from a start of 0,
1 or 2 (an extent below zero is empty); the result is stored as it is, through a global range of 1, or after more
arithmetic with a load of the output. Every result is exact in any summation order, so any lost, doubled or
misplaced piece is a finding at any size: integer data in [-8, 8] (a float32 sum of such terms stays below 2**24;
integers wrap alike in every order), products of ±1 and 2 for floats, any order for max; a tenth of the float
kernels put infinities of one sign in the data (the same sum in every order).
"""

from __future__ import annotations

import random

import numpy as np

from .. import ir
from ..ir import dtypes
from ..ir.dtypes import DType
from .random_kernels import ALL_DTYPES, RandomKernel

SIZES = (0, 1, 2, 3, 5, 17, 1000, 32_769, 65_537, 200_003, 1_100_003)
_FLOATS = (dtypes.float32, dtypes.float64, dtypes.float16)


def lone_kernel(seed: int, pool: tuple[DType, ...] = ALL_DTYPES) -> RandomKernel:
    """One lone reduction (see the module docstring); deterministic in `seed` and `pool`."""
    r = random.Random(seed * 2_654_435_761 + 5)
    dts = [d for d in pool if d in _FLOATS or (d.is_int and not d.is_bool)] or [dtypes.int32]
    dt = r.choice(dts)
    op = r.choice(["sum", "sum", "max", "prod"])
    size = r.choice(SIZES if dt != dtypes.float16 else SIZES[:7])  # float16 holds integers exactly to 2048
    const = r.random() < 0.25
    start = r.choice([0, 0, 0, 1, 2])
    k = ir.KernelBuilder(f"lone{seed}")
    n = size if const else k.var("n", 0, 1 << 24)
    x = k.param("x", dt, max(size, 1) if const else n)
    y = k.param("y", dt, max(size, 1) if const else n)
    o = k.param("o", dt, 2, writable=True)
    rr = k.range(start, n, "reduce") if start else k.range(n, "reduce")
    form = r.choice(["x", "x+y", "x-y", "max", "x*y", "gate"] if op != "prod" else ["x", "x*y"])
    a, b = x[rr], y[rr]
    if form == "x+y":
        v = a + b
    elif form == "x-y":
        v = a - b
    elif form == "max":
        v = ir.maximum(a, b)
    elif form == "x*y":
        v = a * b
    elif form == "gate":  # the next element, or 0 past the end (a gated load)
        v = a + x.load(rr + 1, gate=rr + 1 < n, default=0)
    else:
        v = a
    red = getattr(v, op)(rr)
    if r.random() < 0.3:  # more arithmetic, with a load of the output itself
        red = red * 2 + o[1]
    if r.random() < 0.3:
        g = k.range(1, "global")
        o[g] = red
    else:
        o[0] = red
    kern = k.build()
    nrng = np.random.default_rng(seed)
    m = max(size, 1) if const else size
    inputs = {"x": _data(nrng, dt, m, op, form), "y": _data(nrng, dt, m, op, form),
              "o": np.array([0, 3], dt.np)}
    if not const:
        inputs["n"] = size
    if dt.is_float and op != "prod" and r.random() < 0.1 and m:  # one sign of infinity: one sum in every order
        hit = nrng.random(m) < 0.01
        inputs["x"][hit] = r.choice([np.inf, -np.inf])
    return RandomKernel(kern, inputs, seed)


def _data(rng: np.random.Generator, dt: DType, n: int, op: str, form: str) -> np.ndarray:
    """Terms whose reduction is exact in any order (module docstring)."""
    if op == "prod":
        vals = rng.choice([1, 2, -1], n, p=[0.9, 0.05, 0.05]) if dt.is_float else rng.integers(-8, 9, n)
        if dt.is_float and form == "x*y":
            vals = rng.choice([1, -1], n)
    elif dt.is_unsigned:
        vals = rng.integers(0, 9, n)
    else:
        vals = rng.integers(-8, 9, n)
    return vals.astype(dt.np)
