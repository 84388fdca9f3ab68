"""Hypothesis: random expression trees built with the builder agree with numpy evaluating the same tree directly."""

import devicekit as dk
import numpy as np
from devicekit import ir
from devicekit.ir import dtypes
from hypothesis import given, settings
from hypothesis import strategies as st

DTS = {"float32": (dtypes.float32, np.float32), "float64": (dtypes.float64, np.float64),
       "int32": (dtypes.int32, np.int32), "int64": (dtypes.int64, np.int64), "uint8": (dtypes.uint8, np.uint8)}

FLOAT_OPS = ["add", "sub", "mul", "max", "where", "neg", "sqrt_abs", "exp2_clamped", "div"]
INT_OPS = ["add", "sub", "mul", "max", "where", "and", "or", "xor"]


def trees(depth):
    leaf = st.tuples(st.just("leaf"), st.integers(0, 2))
    if depth == 0:
        return leaf
    sub = trees(depth - 1)
    return st.one_of(leaf, st.tuples(st.sampled_from(sorted(set(FLOAT_OPS) | set(INT_OPS))), sub, sub, sub))


def build(tree, leaves, is_float):
    """The same tree twice: as kernel values (leaves = UOps) and as numpy arrays (leaves = arrays)."""
    if tree[0] == "leaf":
        return leaves[tree[1]]
    op = tree[0] if tree[0] in (FLOAT_OPS if is_float else INT_OPS) else "add"
    a, b, c = (build(t, leaves, is_float) for t in tree[1:])
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        return a / b
    if op == "and":
        return a & b
    if op == "or":
        return a | b
    if op == "xor":
        return a ^ b
    if op == "neg":
        return -a
    if isinstance(a, np.ndarray):
        if op == "max":
            return np.where(a < b, b, a)
        if op == "where":
            return np.where(a < c, b, c)
        if op == "sqrt_abs":
            return np.sqrt(np.abs(a))
        return np.exp2(np.clip(a, -10, 10))
    if op == "max":
        return ir.maximum(a, b)
    if op == "where":
        return ir.where(a < c, b, c)
    if op == "sqrt_abs":
        return ir.sqrt(ir.maximum(a, -a))
    return ir.exp2(ir.minimum(ir.maximum(a, -10.0), 10.0))


@settings(max_examples=60, deadline=None)
@given(tree=trees(4), dt=st.sampled_from(sorted(DTS)), seed=st.integers(0, 2**16))
def test_random_expressions_match_numpy(tree, dt, seed):
    dtype, npdt = DTS[dt]
    rng = np.random.default_rng(seed)
    n = 17
    arrays = [(rng.standard_normal(n) * 4).astype(npdt) if dtype.is_float else rng.integers(-50, 50, n).astype(npdt)
              for _ in range(3)]
    k = ir.KernelBuilder("prop")
    nv = k.var("n", 1, 64)
    ps = [k.param(f"x{j}", dtype, nv) for j in range(3)]
    out = k.param("out", dtype, nv, writable=True)
    i = k.range(nv, "global")
    out[i] = build(tree, [p[i] for p in ps], dtype.is_float)
    got = dk.run(k.build(), device="PYTHON", n=n, **{f"x{j}": a for j, a in enumerate(arrays)})["out"]
    with np.errstate(all="ignore"):
        want = np.asarray(build(tree, arrays, dtype.is_float)).astype(npdt)
    if dtype.is_float:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)
