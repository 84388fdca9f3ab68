"""Long and deep kernels: the fuzzer's generator for graphs as deep as a user builds them (docs/reliability.md).

Every walk of the core (builder, verifier, lowering, optimizer, renderers, the reference) must be iterative: a chain
of a few hundred steps once ended in a raw RecursionError. Each kernel here is one of:

- `chain`: one value through a long chain of steps (300 to 3,000), each a random op with a loaded or constant
  operand; ints wrap (every op defined), floats stay in [-64, 64] by a clamp every few steps and use only
  correctly rounded ops (add, sub, mul, div, max, min, where), so every device gives the reference's bits;
- `pointer`: a load whose index is a load whose index is a load ... (pointer chasing through a permutation, 20 to
  120 levels): loads nested in indices, each proven only at run time;
- `unroll`: a reduction over an unroll range of 100 to 1,500 lanes (one long chain after expansion), or a store per
  lane of one of 50 to 400 (as many statements);
- `nested`: reductions nested 2 to 6 deep, each over its own range, with a chain inside.

A campaign: `python -m devicekit.testing.fuzz --profile deep --n 200` (each pair of the CPU and the PYTHON
reference).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from .. import ir
from ..ir import dtypes
from ..ir.dtypes import DType
from ..ir.uop import UOp
from .random_kernels import RandomKernel, _array

SHAPES = ("chain", "pointer", "unroll", "nested")
INTS = (dtypes.int32, dtypes.int64, dtypes.uint32, dtypes.int8, dtypes.uint16)
FLOATS = (dtypes.float32, dtypes.float64)
_INT_OPS = ("add", "sub", "mul", "xor", "and", "or", "shl", "shr", "idiv", "mod", "max", "min", "where", "neg")
_FLOAT_OPS = ("add", "sub", "mul", "fdiv", "max", "min", "where", "neg")


def deep_kernel(seed: int, scale: float = 1.0, pool: tuple | None = None) -> RandomKernel:
    """One kernel of this generator (see the module docstring); deterministic in `seed`. `scale` multiplies the
    lengths (DEVICEKIT_SLOW campaigns take 10x); `pool` (a fitted campaign) the dtypes it may use (int32 and
    float32 when it has none of a shape's)."""
    r = random.Random(seed * 6151 + 29)
    shape = r.choice(SHAPES)
    fit = (lambda dts: dts) if pool is None else \
        (lambda dts: tuple(d for d in dts if d in pool) or (dtypes.int32, dtypes.float32))
    return {"chain": _chain, "pointer": _pointer, "unroll": _unroll, "nested": _nested}[shape](seed, r, scale, fit)


def _step(r: random.Random, v: UOp, leaf: UOp, dt: DType, k: int) -> UOp:
    """One step of a chain: a random defined op of v and a leaf (a loaded value or a constant)."""
    ops = _FLOAT_OPS if dt.is_float else _INT_OPS
    op = r.choice(ops)
    if op == "add":
        v = v + leaf
    elif op == "sub":
        v = v - leaf
    elif op == "mul":
        v = v * leaf
    elif op == "fdiv":  # by a value in [1, 2]: stays finite, correctly rounded everywhere
        v = v / (ir.minimum(ir.maximum(abs(leaf), 1.0), 2.0))
    elif op == "max":
        v = ir.maximum(v, leaf)
    elif op == "min":
        v = ir.minimum(v, leaf)
    elif op == "where":
        v = ir.where(v < leaf, v + leaf, v - leaf)
    elif op == "neg":
        v = -v
    elif op in ("shl", "shr"):
        v = (v << (k % 5)) if op == "shl" else (v >> (k % 7))
    elif op in ("idiv", "mod"):
        v = (v // leaf) if op == "idiv" else (v % leaf)  # x // 0 and x % 0 are 0 (docs/ir.md)
    else:
        v = {"xor": lambda: v ^ leaf, "and": lambda: v & leaf, "or": lambda: v | leaf}[op]()
    if dt.is_float and k % 4 == 3:  # keep floats small: a product never overflows, sums stay exact-ish per step
        v = ir.minimum(ir.maximum(v, -64.0), 64.0)
    return v


def _inputs_for(nrng: np.random.Generator, dt: DType, n: int) -> np.ndarray:
    if dt.is_float:
        return np.round(nrng.standard_normal(n) * 4, 2).astype(dt.np)
    return _array(nrng, dt, n)


def _chain(seed: int, r: random.Random, scale: float, fit) -> RandomKernel:
    dt = r.choice(fit(INTS + FLOATS))
    steps = int(r.randint(300, 3000) * scale)
    n_val = r.choice([1, 3, 8, 17])
    k = ir.KernelBuilder(f"deep{seed}")
    n = k.var("n", 1, 64)
    x = k.param("x", dt, n * 4)
    out = k.param("out", dt, n, writable=True)
    i = k.range(n, "global")
    leaves = [x[i * 4 + j] for j in range(4)]
    v = leaves[0]
    for s in range(steps):
        leaf = r.choice(leaves) if r.random() < 0.7 else UOp.const(dt, r.choice([1, 2, 3, 5]) if dt.is_int
                                                                       else r.choice([0.5, 1.25, -2.0, 3.0]))
        v = _step(r, v, leaf, dt, s)
    out[i] = v
    nrng = np.random.default_rng(seed)
    return RandomKernel(k.build(), {"x": _inputs_for(nrng, dt, n_val * 4), "n": n_val}, seed)


def _pointer(seed: int, r: random.Random, scale: float, fit) -> RandomKernel:
    depth = int(r.randint(20, 120) * scale)  # each level a run-time bounds record: LLVM O3 is superlinear in them
    m_val, n_val = r.choice([5, 17, 64]), r.choice([1, 4, 9])
    k = ir.KernelBuilder(f"deep{seed}")
    n, m = k.var("n", 1, 64), k.var("m", 1, 64)
    nxt = k.param("nxt", dtypes.int32, m)
    val = k.param("val", dtypes.float32, m)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    j = i % m
    for _ in range(depth):
        j = nxt[j]
    out[i] = val[j] + nxt[j].cast(dtypes.float32)
    nrng = np.random.default_rng(seed)
    perm = nrng.permutation(m_val).astype(np.int32)
    inputs: dict[str, Any] = {"nxt": perm, "val": _inputs_for(nrng, dtypes.float32, m_val), "n": n_val, "m": m_val}
    return RandomKernel(k.build(), inputs, seed)


def _unroll(seed: int, r: random.Random, scale: float, fit) -> RandomKernel:
    dt = r.choice(fit(INTS + FLOATS))
    k = ir.KernelBuilder(f"deep{seed}")
    if r.random() < 0.5:
        lanes = int(r.randint(100, 1500) * scale)
        x = k.param("x", dt, 64)
        out = k.param("out", dt, 1, writable=True)
        u = k.range(lanes, "unroll")
        term = x[u % 64]
        term = ir.minimum(ir.maximum(term, -2.0), 2.0) if dt.is_float else term
        out[0] = term.max(u) if r.random() < 0.3 else term.sum(u)
    else:
        lanes = int(r.randint(50, 400) * scale)
        x = k.param("x", dt, 64)
        out = k.param("out", dt, lanes, writable=True)
        u = k.range(lanes, "unroll")
        out[u] = x[u % 64] + x[(u * 7 + 3) % 64]
    nrng = np.random.default_rng(seed)
    return RandomKernel(k.build(), {"x": _inputs_for(nrng, dt, 64)}, seed)


def _nested(seed: int, r: random.Random, scale: float, fit) -> RandomKernel:
    dt = r.choice(fit((dtypes.int32, dtypes.int64, dtypes.float64)))
    levels = r.randint(2, 6)
    steps = int(r.randint(20, 200) * scale)
    k = ir.KernelBuilder(f"deep{seed}")
    x = k.param("x", dt, 8)
    out = k.param("out", dt, 4, writable=True)
    i = k.range(4, "global")
    ranges = [k.range(r.choice([1, 2, 3]), "reduce") for _ in range(levels)]
    v = x[(i + ranges[-1]) % 8]
    for s in range(steps):
        v = _step(r, v, x[(i + s) % 8], dt, s)
    for rg in reversed(ranges):
        if dt.is_float:
            v = ir.minimum(ir.maximum(v, -64.0), 64.0)
        v = (v + x[(rg + i) % 8]).sum(rg) if r.random() < 0.7 else (v + x[rg % 8]).max(rg)
    out[i] = v
    nrng = np.random.default_rng(seed)
    return RandomKernel(k.build(), {"x": _inputs_for(nrng, dt, 8)}, seed)
