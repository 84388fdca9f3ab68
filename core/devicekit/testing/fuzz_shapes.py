"""Kernels over shaped params with triangular ranges, related vars and boundary loads: the fuzzer's generator for the
IR constructs of docs/ir.md's "Triangular ranges", "Related vars" and "Shaped params".

Each kernel reads an n x n param `x` through `x[a, b]` and `x.get(...)`, where the indices are the lane's global
range i (a quarter of them starting at 1 or 2), a `loop` range j that may start at i + c or end at i + 1, a `reduce` range over a triangle (l in [i + c, n),
[0, i + 1), [j, n) or [kk, n)), and a var kk bounded by n - 1; it writes its own row of the n x n output. A third
of them also write a second output over an unrelated global range (independent iteration spaces, bicg's shape:
each element computed once, by one thread). So every kernel is defined, and a difference between a device and the
reference is a finding.
"""

from __future__ import annotations

import random

import numpy as np

from .. import ir
from ..ir import dtypes
from .fuzzgen import ExprGen
from .random_kernels import RandomKernel, _array

DTYPES = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64)


def shaped_kernel(seed: int, pool: tuple = DTYPES) -> RandomKernel:
    """One kernel of this generator (see the module docstring); deterministic in `seed`."""
    r = random.Random(seed * 6151 + 11)
    dt = r.choice([d for d in DTYPES if d in pool] or [dtypes.float32])
    k = ir.KernelBuilder(f"sh{seed}")
    n = k.var("n", 1, 48)
    kk = k.var("kk", 0, n - 1)
    x = k.param("x", dt, shape=(n, n))
    out = k.param("out", dt, shape=(n, n), writable=True)
    # a quarter of the lane ranges start past 0 (a stencil's interior: k.range(1, n, "global"))
    i = k.range(n, "global") if r.random() < 0.75 else k.range(r.choice([1, 2]), n, "global")
    c = r.choice([0, 1, 2])
    j = r.choice([k.range(n, "loop"), k.range(i + c, n, "loop"), k.range(i + 1, kind="loop")])
    gen = ExprGen(r, (dt,))
    leaves = [x[i, j], x[j, i], x.get((i, j + 1)), x.get((j - 1, i)), x[kk, j], x.get((i - c, kk))]
    value = gen.expr(dt, {dt: leaves}, 2)
    if r.random() < 0.6:
        lr = r.choice([k.range(i + c, n, "reduce"), k.range(i + 1, kind="reduce"), k.range(j, n, "reduce"),
                       k.range(kk, n, "reduce")])
        term = gen.expr(dt, {dt: [x[i, lr], x[lr, j], x.get((lr + 1, i))]}, 1)
        value = value + (term.maximum(term - term) if r.random() < 0.3 else term).sum(lr)
    out[i, j] = value
    spaces = r.random() < 1 / 3
    if spaces:
        n2 = k.var("n2", 1, 300)
        out2 = k.param("out2", dt, n2, writable=True)
        g = k.range(n2, "global")
        gn = g % n
        out2[g] = gen.expr(dt, {dt: [x[gn, gn], x[kk, gn], x.get((gn + 1, kk))]}, 2)
    kern = k.build()
    nrng = np.random.default_rng(seed)
    n_val = r.choice([1, 2, 3, 5, 8, 13])
    inputs = {"n": n_val, "kk": r.randrange(n_val), "x": _array(nrng, dt, n_val * n_val),
              "out": np.zeros(n_val * n_val, dt.np)}
    if spaces:
        n2_val = r.choice([1, 7, 255, 300])
        inputs.update(n2=n2_val, out2=np.zeros(n2_val, dt.np))
    return RandomKernel(kern, inputs, seed)
