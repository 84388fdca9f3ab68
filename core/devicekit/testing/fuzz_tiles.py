"""Matmul-like kernels: the fuzzer's generator for the heuristic optimizer (ir/optimize.py), which rewrites exactly
these (a reduction over global ranges) into register tiles.

Each kernel writes `out[i, j] = epilogue(reduce_r(term(a[i, r], b[r, j])))` over 2 global ranges (a third of them
batched over a third one), with what a user's gemm, gemv or stencil has around it: constant and var sizes that no
tile divides (a var K up to 2100: several K blocks), lane ranges that start past 0, float32/float64/int32/float16 (summed in float32 or in float16), shaped
and flat indices, b transposed (no unit stride: nothing to upcast), a transposed store, gated boundary loads, k.scalar
params, epilogues (bias, relu, alpha, the output's own old value read in place), max and sum reductions, a triangular
reduce (r <= i: i may not be tiled), a second statement over the same lanes. Every kernel is defined and in bounds,
so a difference between a device and the PYTHON reference (which the optimizer never touches) is a finding.
"""

from __future__ import annotations

import random

import numpy as np

from .. import ir
from ..ir import dtypes
from .fuzzgen import ExprGen
from .random_kernels import RandomKernel, _array

DTYPES = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.float16)
SIZES = (1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 24, 33)


def tile_kernel(seed: int, pool: tuple = DTYPES) -> RandomKernel:
    """One kernel of this generator (see the module docstring); deterministic in `seed`. `pool`: the dtypes it may
    use (those of DTYPES a device lacks are left out; float32 when none is left)."""
    r = random.Random(seed * 7919 + 5)
    dt = r.choice([d for d in DTYPES if d in pool] or [dtypes.float32])
    acc = dtypes.float32 if dt == dtypes.float16 and r.random() < 0.5 else dt
    k = ir.KernelBuilder(f"tile{seed}")
    vals: dict[str, int] = {}

    def dim(name: str):
        v = r.choice(SIZES)
        if r.random() < 0.5:
            vals[name] = v
            return k.var(name, 1, 2200 if name == "kd" else 40)
        return v

    tri = r.random() < 0.15  # a triangular reduce: r in [0, i] over a square a
    M = dim("m")
    N = dim("n")
    K = M if tri else dim("kd")
    batch = r.choice([None, None, 2, 3])
    flat = r.random() < 0.3
    bt_t = r.random() < 0.2  # b stored transposed: b[j, r]
    pre = (batch,) if batch else ()

    def param(name: str, shape: tuple, writable: bool = False):
        if flat:
            size = 1
            for s in shape:
                size = size * s
            return k.param(name, dt, size, writable=writable), shape
        return k.param(name, dt, shape=shape, writable=writable), None

    a, a_flat = param("a", pre + (M, K))
    b, b_flat = param("b", pre + ((N, K) if bt_t else (K, N)))
    t_store = r.random() < 0.15
    out, out_flat = param("out", pre + ((N, M) if t_store else (M, N)), writable=True)
    bias = k.param("bias", dt, shape=(N,)) if r.random() < 0.3 else None
    alpha = k.scalar("alpha", dt) if r.random() < 0.25 else None

    def at(ref, shape, idx):
        """ref[idx] through a flat row-major index when the params are flat."""
        if shape is None:
            return idx
        flat_idx = idx[0]
        for s, x in zip(shape[1:], idx[1:]):
            flat_idx = flat_idx * s + x
        return flat_idx

    bt = k.range(batch, "global") if batch else None
    bx = (bt,) if batch else ()
    i = k.range(r.choice([1, 2]), M, "global") if r.random() < 0.2 and not tri else k.range(M, "global")
    j = k.range(N, "global")
    red = k.range(i + 1, kind="reduce") if tri else k.range(K, "reduce")
    cast = (lambda v: v.cast(acc)) if acc != dt else (lambda v: v)
    av = cast(a[at(a, a_flat, bx + (i, red))])
    bv = cast(b[at(b, b_flat, bx + ((j, red) if bt_t else (red, j)))])
    leaves = [av, bv]
    if r.random() < 0.25 and a_flat is None:  # a boundary load: the row above, 0 on the first row
        leaves.append(cast(a.get(bx + (i - 1, red))))
    gen = ExprGen(r, (acc,))
    term = av * bv if r.random() < 0.5 else gen.expr(acc, {acc: leaves}, r.choice([1, 2]))
    value = term.max(red) if r.random() < 0.15 else term.sum(red)
    value = value.cast(dt) if acc != dt else value
    oidx = at(out, out_flat, bx + ((j, i) if t_store else (i, j)))
    if r.random() < 0.25:
        value = value + out[oidx]  # in place: the lane reads its own old output
    if bias is not None:
        value = value + bias[j]
    if alpha is not None:
        value = value * alpha
    if r.random() < 0.2:
        value = value.maximum(value - value)  # relu
    out[oidx] = value
    second = r.random() < 0.2
    if second:
        out2, out2_flat = param("out2", pre + (M, N), writable=True)
        out2[at(out2, out2_flat, bx + (i, j))] = (cast(a[at(a, a_flat, bx + (i, red))]) * 2).sum(red).cast(dt) \
            if acc != dt else (a[at(a, a_flat, bx + (i, red))] * 2).sum(red)
    kern = k.build()
    if "kd" in vals and not tri and dt in (dtypes.float32, dtypes.float64) and acc == dt and r.random() < 0.15:
        vals["kd"] = r.choice([200, 1100, 2100])  # a var K past one K block of the packed tile (ir/pack.py), drawn
        # last: every other draw of a seed is what it was
    nrng = np.random.default_rng(seed)
    m_v, n_v = vals.get("m", M), vals.get("n", N)
    k_v = m_v if tri else vals.get("kd", K)
    nb = batch or 1
    inputs: dict = dict(vals)
    small = dt.is_float  # float16 sums of K terms stay finite; ints stay small so products do not wrap
    arr = (lambda n: _array(nrng, dt, n) if small else nrng.integers(-20, 20, n).astype(dt.np))
    if k_v > 64:  # a long sum: integers in [-4, 4], exact in any order (the reference's own order is one of many)
        arr = (lambda n: nrng.integers(-4, 5, n).astype(dt.np))
    inputs.update(a=arr(nb * m_v * k_v), b=arr(nb * k_v * n_v), out=arr(nb * m_v * n_v))
    if bias is not None:
        inputs["bias"] = arr(n_v)
    if alpha is not None:
        inputs["alpha"] = r.choice([0.5, -1.5, 2.0]) if dt.is_float else r.choice([-2, 3])
    if second:
        inputs["out2"] = np.zeros(nb * m_v * n_v, dt.np)
    return RandomKernel(kern, inputs, seed)
