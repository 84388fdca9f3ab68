"""Hand-written kernels through both pairs ("llvm", "c"), against numpy and the PYTHON reference."""

from __future__ import annotations

import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes

PAIRS = ("llvm", "c")
rng = np.random.default_rng(0)


def saxpy():
    k = ir.KernelBuilder("saxpy")
    n = k.var("n", lo=1, hi=1 << 30)
    x, y = k.param("x", dtypes.float32, size=n), k.param("y", dtypes.float32, size=n)
    out = k.param("out", dtypes.float32, size=n, writable=True)
    i = k.range(n, kind="global")
    out[i] = x[i] * 2.0 + y[i]
    return k.build()


def row_reduce(op: str):
    k = ir.KernelBuilder(f"row_{op}")
    m, n = k.var("m", lo=1, hi=1 << 20), k.var("n", lo=1, hi=1 << 20)
    a = k.param("a", dtypes.float32, size=m * n)
    o = k.param("o", dtypes.float32, size=m, writable=True)
    i = k.range(m, kind="global")
    r = k.range(n, kind="reduce")
    o[i] = getattr(a[i * n + r], op)(r)
    return k.build()


def unary_math():
    k = ir.KernelBuilder("unary_math")
    n = k.var("n", lo=1, hi=1 << 30)
    x = k.param("x", dtypes.float32, size=n)
    o = k.param("o", dtypes.float32, size=n * 5, writable=True)
    i = k.range(n, kind="global")
    o[i * 5] = ir.exp2(x[i])
    o[i * 5 + 1] = ir.log2(x[i])
    o[i * 5 + 2] = ir.sin(x[i])
    o[i * 5 + 3] = ir.sqrt(x[i])
    o[i * 5 + 4] = ir.trunc(x[i] * 3.0) + ir.recip(x[i])
    return k.build()


def int_ops(dt):
    k = ir.KernelBuilder(f"int_ops_{dt.name}")
    n = k.var("n", lo=1, hi=1 << 30)
    a, b = k.param("a", dt, size=n), k.param("b", dt, size=n)
    o = k.param("o", dt, size=n * 8, writable=True)
    i = k.range(n, kind="global")
    x, y = a[i], b[i]
    for j, v in enumerate([x // y, x % y, x & y, x | y, x ^ y, x << (y & 7), x >> (y & 3), ir.maximum(x, y)]):
        o[i * 8 + j] = v
    return k.build()


def casts_where():
    k = ir.KernelBuilder("casts_where")
    n = k.var("n", lo=1, hi=1 << 30)
    x = k.param("x", dtypes.float32, size=n)
    oi = k.param("oi", dtypes.int32, size=n, writable=True)
    ob = k.param("ob", dtypes.bool, size=n, writable=True)
    od = k.param("od", dtypes.float64, size=n, writable=True)
    ou = k.param("ou", dtypes.uint8, size=n, writable=True)
    i = k.range(n, kind="global")
    oi[i] = x[i].cast(dtypes.int32)
    ob[i] = x[i] < 0.5
    od[i] = ir.where(x[i] < 0.0, x[i].cast(dtypes.float64) * 2.0, x[i].cast(dtypes.float64))
    ou[i] = (x[i] * 10.0).cast(dtypes.int32).cast(dtypes.uint8)
    return k.build()


def gated_shift():
    """o[i] = x[i-1] (0 at i == 0): a gated load."""
    k = ir.KernelBuilder("gated_shift")
    n = k.var("n", lo=1, hi=1 << 30)
    x = k.param("x", dtypes.float32, size=n)
    o = k.param("o", dtypes.float32, size=n, writable=True)
    i = k.range(n, kind="global")
    o[i] = x.load(i - 1, gate=i > 0, default=0.0)
    return k.build()


def matmul_small():
    k = ir.KernelBuilder("mm")
    m, n, kk = 17, 23, 31
    a = k.param("a", dtypes.float32, size=m * kk)
    b = k.param("b", dtypes.float32, size=kk * n)
    c = k.param("c", dtypes.float32, size=m * n, writable=True)
    i, j = k.range(m, kind="global"), k.range(n, kind="global")
    r = k.range(kk, kind="reduce")
    c[i * n + j] = (a[i * kk + r] * b[r * n + j]).sum(r)
    return k.build()


@pytest.mark.parametrize("pair", PAIRS)
def test_saxpy(pair, single_pair, close):
    n = 1000
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    out = __import__("devicekit").run(saxpy(), device=single_pair(pair), x=x, y=y, n=n)["out"]
    close(out, x * 2 + y)


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("op", ["sum", "max", "prod"])
def test_row_reduce(pair, op, single_pair, close):
    import devicekit as dk
    m, n = 37, 129
    a = rng.uniform(0.5, 1.5, size=m * n).astype(np.float32)
    if op != "max":  # NaN through MAX depends on operand order: see the PYTHON comparison
        a[5] = np.nan
    got = dk.run(row_reduce(op), device=single_pair(pair), a=a, m=m, n=n)["o"]
    want = {"sum": np.sum, "max": np.max, "prod": np.prod}[op](a.reshape(m, n).astype(np.float64), axis=1)
    close(got, want.astype(np.float32), rtol=1e-4)


@pytest.mark.parametrize("pair", PAIRS)
def test_unary_math(pair, single_pair, close):
    import devicekit as dk
    x = np.concatenate([rng.uniform(0.01, 20, 200), [0.0, np.inf, np.nan, 1.0]]).astype(np.float32)
    got = dk.run(unary_math(), device=single_pair(pair), x=x, n=x.size)["o"].reshape(-1, 5)
    with np.errstate(all="ignore"):
        want = np.stack([np.exp2(x), np.log2(x), np.sin(x), np.sqrt(x), np.trunc(x * 3) + 1 / x], 1)
    close(got, want, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.int8])
def test_int_ops(pair, dt, single_pair, close):
    import devicekit as dk
    n = 300
    info = np.iinfo(dt.np)
    a = rng.integers(max(info.min, -1000), min(info.max, 1000), n).astype(dt.np)
    b = rng.integers(max(info.min, -50), 50, n).astype(dt.np)
    b[:10] = 0  # division by zero gives 0, as in the reference
    got = dk.run(int_ops(dt), device=single_pair(pair), a=a, b=b, n=n)["o"].reshape(n, 8)
    from devicekit.ir import semantics
    from devicekit.ir.ops import Ops
    want = np.stack([semantics.alu(Ops.IDIV, dt, a, b), semantics.alu(Ops.MOD, dt, a, b), a & b, a | b, a ^ b,
                     semantics.alu(Ops.SHL, dt, a, b & 7), semantics.alu(Ops.SHR, dt, a, b & 3),
                     np.where(a < b, b, a)], 1)
    close(got, want)


@pytest.mark.parametrize("pair", PAIRS)
def test_casts_where(pair, single_pair, close):
    import devicekit as dk
    x = np.concatenate([rng.uniform(-20, 20, 100), [0.5, -0.0, 0.49]]).astype(np.float32)
    r = dk.run(casts_where(), device=single_pair(pair), x=x, n=x.size)
    close(r["oi"], np.trunc(x).astype(np.int32))
    close(r["ob"], x < 0.5)
    xd = x.astype(np.float64)
    close(r["od"], np.where(x < 0, xd * 2, xd))
    close(r["ou"], (x * 10).astype(np.int32).astype(np.uint8))


@pytest.mark.parametrize("pair", PAIRS)
def test_gated_load(pair, single_pair, close):
    import devicekit as dk
    x = rng.standard_normal(100).astype(np.float32)
    got = dk.run(gated_shift(), device=single_pair(pair), x=x, n=x.size)["o"]
    close(got, np.concatenate([[0.0], x[:-1]]).astype(np.float32))


@pytest.mark.parametrize("pair", PAIRS)
def test_matmul_small(pair, single_pair, close):
    import devicekit as dk
    a = rng.standard_normal(17 * 31).astype(np.float32)
    b = rng.standard_normal(31 * 23).astype(np.float32)
    got = dk.run(matmul_small(), device=single_pair(pair), a=a, b=b)["c"]
    close(got, (a.reshape(17, 31) @ b.reshape(31, 23)).reshape(-1), rtol=1e-4, atol=1e-4)


KERNELS = {
    "saxpy": (saxpy, lambda: {"x": rng.standard_normal(333, dtype=np.float32),
                              "y": rng.standard_normal(333, dtype=np.float32), "n": 333}),
    "row_max": (lambda: row_reduce("max"), lambda: {"a": rng.standard_normal(12 * 50, dtype=np.float32),
                                                   "m": 12, "n": 50}),
    "unary_math": (unary_math, lambda: {"x": rng.uniform(0.1, 9, 64).astype(np.float32), "n": 64}),
    "int_ops": (lambda: int_ops(dtypes.int32), lambda: {"a": rng.integers(-99, 99, 64).astype(np.int32),
                                                        "b": rng.integers(-9, 9, 64).astype(np.int32), "n": 64}),
    "casts_where": (casts_where, lambda: {"x": rng.uniform(-9, 9, 64).astype(np.float32), "n": 64}),
    "gated_shift": (gated_shift, lambda: {"x": rng.standard_normal(64).astype(np.float32), "n": 64}),
    "matmul_small": (matmul_small, lambda: {"a": rng.standard_normal(17 * 31).astype(np.float32),
                                            "b": rng.standard_normal(31 * 23).astype(np.float32)}),
}


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_vs_python_reference(name, pair, single_pair, python_ref, close):
    import devicekit as dk
    build, args = KERNELS[name]
    kernel, named = build(), args()
    want = python_ref(kernel, **named)
    got = dk.run(kernel, device=single_pair(pair), **named)
    assert set(got) == set(want)
    for k in want:
        close(got[k], want[k], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.int64, dtypes.int8])
def test_division_never_traps(pair, dt, single_pair, close):
    """x/0 and x%0 give 0, INT_MIN / -1 wraps and INT_MIN % -1 is 0: no SIGFPE."""
    import devicekit as dk
    from devicekit.ir import semantics
    from devicekit.ir.ops import Ops
    k = ir.KernelBuilder(f"divs_{dt.name}")
    n = k.var("n", lo=1, hi=1 << 20)
    a, b = k.param("a", dt, size=n), k.param("b", dt, size=n)
    o = k.param("o", dt, size=n * 4, writable=True)
    i = k.range(n, kind="global")
    o[i * 4], o[i * 4 + 1] = a[i] // b[i], a[i] % b[i]
    o[i * 4 + 2], o[i * 4 + 3] = a[i] // -1, a[i] % -1
    lo = np.iinfo(dt.np).min
    av = np.array([lo, lo, 7, -7, lo, 5], dt.np)
    bv = np.array([-1, 0, 0, -1, 1, 2], dt.np)
    got = dk.run(k.build(), device=single_pair(pair), a=av, b=bv, n=av.size)["o"].reshape(-1, 4)
    with np.errstate(all="ignore"):
        want_div = semantics.alu(Ops.IDIV, dt, av, bv)
        want_mod = semantics.alu(Ops.MOD, dt, av, bv)
    close(got[:, 0], want_div)
    close(got[:, 1], want_mod)
    close(got[:, 2], (-av.astype(np.int64)).astype(dt.np))
    close(got[:, 3], np.zeros_like(av))
