"""Gemms the optimizer packs: the fuzzer's generator for ir/pack.py. fuzz_tiles draws matmul-like kernels with every
feature around them (batches, triangles, second statements, in-place outputs, int and half types), and most of those
leave the packed form (it takes one statement over exactly the row and column ranges, one float ADD reduction, no
load of the output): a campaign of 600 reached it about 30 times. These are the layers of a framework, as
examples/mlp_train.py writes them (issue 31: the class-fixing rule):

    out[i, j] = epilogue(sum_r term(A(i, r), B(r, j)))

over var or constant sizes that no tile (8 rows), vector (16 lanes), panel (32) or K block divides, M and N up to
70, K up to 2100 (several blocks of the CPU's kc), float32 or float64; A or B read transposed, flat or shaped; the
term a product, scaled, shifted or with a scalar; the epilogue none, a bias, relu, a scalar alpha, a mask
(`where(mask > 0, v, 0)`) or a mix. Every kernel is defined and in bounds; the PYTHON reference is the oracle.
Past 64 terms the operands are small integers, so that a sum is exact in any order (a long float sum's value
depends on its order past the tolerance: seed 660973 of the first mixed campaign, K = 2099).
"""

from __future__ import annotations

import random

import numpy as np

from .. import ir
from ..ir import dtypes
from ..ir.dtypes import DType
from .random_kernels import ALL_DTYPES, RandomKernel, _array

MN = (1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 64, 70)
KS = (1, 3, 16, 17, 40, 200, 1100, 2100)


def gemm_kernel(seed: int, pool: tuple[DType, ...] = ALL_DTYPES) -> RandomKernel:
    """One gemm (see the module docstring); deterministic in `seed` and `pool`."""
    r = random.Random(seed * 1_000_003 + 11)
    dt = r.choice([d for d in (dtypes.float32, dtypes.float64) if d in pool] or [dtypes.float32])
    k = ir.KernelBuilder(f"gemm{seed}")
    vals: dict[str, int] = {}

    def dim(name: str, choices: tuple[int, ...], hi: int):
        v = r.choice(choices)
        if r.random() < 0.7:
            vals[name] = v
            return k.var(name, 1, hi)
        return v

    M, N, K = dim("m", MN, 128), dim("n", MN, 128), dim("kd", KS, 4096)
    ta, tb, flat = r.random() < 0.25, r.random() < 0.25, r.random() < 0.3

    def param(name: str, shape: tuple, writable: bool = False):
        if flat:
            return k.param(name, dt, shape[0] * shape[1], writable=writable), shape[1]
        return k.param(name, dt, shape=shape, writable=writable), None

    def at(ref, width, row, col):
        return ref[row * width + col] if width is not None else ref[row, col]

    a, aw = param("a", (K, M) if ta else (M, K))
    b, bw = param("b", (N, K) if tb else (K, N))
    out, ow = param("out", (M, N), writable=True)
    epi = r.choice(["none", "bias", "relu", "bias relu", "alpha", "mask", "bias mask"])
    bias = k.param("bias", dt, shape=(N,)) if "bias" in epi else None
    mask, mw = param("mask", (M, N)) if "mask" in epi else (None, None)
    alpha = k.scalar("alpha", dt) if epi == "alpha" or r.random() < 0.15 else None
    i, j, rr = k.range(M, "global"), k.range(N, "global"), k.range(K, "reduce")
    av = at(a, aw, rr, i) if ta else at(a, aw, i, rr)
    bv = at(b, bw, j, rr) if tb else at(b, bw, rr, j)
    term = r.choice(["ab", "ab", "ab", "2ab", "a1b", "alpha"])
    if term == "2ab":
        t = av * bv * 2.0
    elif term == "a1b":
        t = (av + 1.0) * bv
    elif term == "alpha" and alpha is not None:
        t = av * (bv * alpha)
    else:
        t = av * bv
    v = t.sum(rr)
    if bias is not None:
        v = v + bias[j]
    if "relu" in epi:
        v = ir.maximum(v, 0.0)
    if epi == "alpha" and alpha is not None:
        v = v * alpha
    if mask is not None:
        v = ir.where(at(mask, mw, i, j) > 0.0, v, 0.0)
    out[i * ow + j if ow is not None else (i, j)] = v
    kern = k.build()
    nrng = np.random.default_rng(seed)
    m_v, n_v, k_v = vals.get("m", M), vals.get("n", N), vals.get("kd", K)
    inputs: dict = dict(vals)
    # a long sum of random floats is ill-conditioned (the reference's sequential order is one result of many, 1e-3
    # apart at K = 2099): past 64 terms a and b are integers in [-4, 4], exact in any order and any K blocking
    ab = (lambda n: nrng.integers(-4, 5, n).astype(dt.np)) if k_v > 64 else (lambda n: _array(nrng, dt, n))
    inputs.update(a=ab(m_v * k_v), b=ab(k_v * n_v), out=_array(nrng, dt, m_v * n_v))
    if bias is not None:
        inputs["bias"] = _array(nrng, dt, n_v)
    if mask is not None:
        inputs["mask"] = _array(nrng, dt, m_v * n_v)
    if alpha is not None:
        inputs["alpha"] = r.choice([0.5, -1.5, 2.0])
    return RandomKernel(kern, inputs, seed)
