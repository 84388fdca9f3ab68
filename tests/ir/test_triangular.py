"""Ranges with a start and ranges whose bounds use enclosing ranges (triangular loops), against numpy: the
reference masks a box (reference/triangles.py), compiled devices run the real loops."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit.ir.linearize import lower
from devicekit.testing.devices import device_for

DEVICES = ["PYTHON", "CPU/llvm", "CPU/c"]



def prefix_sum():
    k = ir.KernelBuilder("prefix")
    n = k.var("n", 1, 4096)
    x, o = k.param("x", dtypes.float64, n), k.param("o", dtypes.float64, n, writable=True)
    i = k.range(n, "global")
    r = k.range(i + 1, kind="reduce")
    o[i] = x[r].sum(r)
    return k.build()


def trmm():
    """B[i, j] = sum over l in (i, n) of A[l, i] * B0[l, j] (PolyBench trmm's strictly triangular sum)."""
    k = ir.KernelBuilder("trmm")
    n, m = k.var("n", 1, 128), k.var("m", 1, 128)
    a = k.param("A", dtypes.float64, shape=(n, n))
    b0 = k.param("B0", dtypes.float64, shape=(n, m))
    b = k.param("B", dtypes.float64, shape=(n, m), writable=True)
    i, j = k.range(n, "global"), k.range(m, "loop")
    lr = k.range(i + 1, n, "reduce")
    b[i, j] = b0[i, j] + (a[lr, i] * b0[lr, j]).sum(lr)
    return k.build()


def nested():
    """Three levels: j in [0, i], l in [j, i]: o[i] = sum_j sum_l x[l] (each bound uses the one outside it)."""
    k = ir.KernelBuilder("nested")
    n = k.var("n", 1, 256)
    x, o = k.param("x", dtypes.float64, n), k.param("o", dtypes.float64, n, writable=True)
    i = k.range(n, "global")
    j = k.range(i + 1, kind="loop")
    lr = k.range(j, i + 1, "reduce")
    o[i] = 0.0
    o[i] = o[i] + x[lr].sum(lr)  # a loop-carried sum through memory over the triangular j loop
    _ = j
    return k.build()


def reopened():
    """A statement outside the loops between two in the triangle: the loops reopen as copies whose bounds read the
    copies of the loops they depend on."""
    k = ir.KernelBuilder("reopened")
    n = k.var("n", 1, 64)
    a = k.param("a", dtypes.float32, shape=(n, n), writable=True)
    c = k.param("c", dtypes.float32, 1, writable=True)
    i = k.range(n, "loop")
    j = k.range(i + 1, n, "loop")
    a[i, j] = 1.0
    c[0] = 5.0
    a[j, i] = 2.0
    return k.build()


def _numpy(name, inputs):
    if name == "prefix":
        return {"o": np.cumsum(inputs["x"])}
    if name == "trmm":
        a, b0, n = inputs["A"].reshape(inputs["n"], -1), inputs["B0"].reshape(inputs["n"], -1), inputs["n"]
        return {"B": (b0 + np.tril(a, -1).T @ b0).ravel()}
    if name == "nested":
        x = inputs["x"]
        return {"o": np.array([sum(x[j:i + 1].sum() for j in range(i + 1)) for i in range(inputs["n"])])}
    n = inputs["n"]
    up = np.triu(np.ones((n, n), np.float32), 1)
    return {"a": (up * 1.0 + up.T * 2.0).ravel(), "c": np.array([5.0], np.float32)}


CASES = {"prefix": prefix_sum, "trmm": trmm, "nested": nested, "reopened": reopened}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_triangular_ranges_match_numpy(name, device):
    rng = np.random.default_rng(3)
    kern = CASES[name]()
    for n in (1, 2, 7):
        inputs = {"n": n}
        if name in ("prefix", "nested"):
            inputs["x"] = rng.standard_normal(n)
        elif name == "trmm":
            inputs.update(m=3, A=rng.standard_normal(n * n), B0=rng.standard_normal(n * 3))
        else:
            inputs.update(a=np.zeros(n * n, np.float32), c=np.zeros(1, np.float32))
        got = dk.run(kern, device_for(device), **inputs)
        for key, want in _numpy(name, inputs).items():
            np.testing.assert_allclose(got[key].reshape(np.shape(want)), want, rtol=1e-12, atol=1e-12,  # B: (n, m)
                                       err_msg=f"{name} n={n} {key}")


def test_triangular_accesses_are_proven():
    """start <= r <= end - 1 with the bounds' own extremes: every access above is proven (no run-time check)."""
    caps = dk.device("CPU").renderer.capabilities
    for make in CASES.values():
        assert lower(make(), caps).checks is None, make.__name__


def test_the_compiled_loop_is_triangular():
    """The reduce loop starts at i + 1 (no box, no mask): `for (ridx = alu; ...)`, alu = ridx0 + 1."""
    import re
    src = device_for("CPU/c").renderer.render(trmm()).src
    starts = re.findall(r"for \(long long ridx\d+ = (\w+);", src)
    assert starts[:2] == ["core_start", "0ll"] and starts[2].startswith("alu"), src
    assert re.search(rf"long long {starts[2]} = \(ridx0\+1ll\);", src), src


def test_what_may_not_be_triangular():
    k = ir.KernelBuilder("k")
    n = k.var("n", 1, 8)
    i = k.range(n, "global")
    r = k.range(n, "reduce")
    with pytest.raises(ir.KernelError, match="only loop and reduce ranges may be triangular"):
        k.range(i + 1, kind="global")
    with pytest.raises(ir.KernelError, match="a loop or reduce range's bounds may use global, local and loop"):
        k.range(r, kind="loop")
    with pytest.raises(ir.KernelError, match="unroll range needs a constant end and no start"):
        k.range(1, 4, "unroll")
    assert k.range(0, n, "loop").src == k.range(n, "loop").src  # a zero start is no start


@pytest.mark.parametrize("device", DEVICES)
def test_a_folded_reduction_over_a_triangular_range(device):
    """fuzz seed 677 (shapes): (x * 0).sum(l), l in [i + 1, n), folds to a constant: the reduction still depends on
    i through l's bounds (the scheduler emitted them outside i's loop: an internal scheduling error)."""
    k = ir.KernelBuilder("folded")
    n = k.var("n", 1, 48)
    x = k.param("x", dtypes.int64, n)
    o = k.param("o", dtypes.int64, n, writable=True)
    i = k.range(n, "global")
    lr = k.range(i + 1, n, "reduce")
    o[i] = (x.get(lr + 1) * 0).sum(lr) + i
    got = dk.run(k.build(), device_for(device), x=np.arange(5), n=5)["o"]
    np.testing.assert_array_equal(got, np.arange(5))
