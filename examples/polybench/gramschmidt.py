"""PolyBench/C 4.2 gramschmidt: A = Q R by modified Gram-Schmidt (A, Q: m x n, R: n x n); A is overwritten.

Column k needs every column before it finished, so the kernel is one lane running PolyBench's loops in order.

PolyBench's A has m < n and rank below m (15 at MINI), so past the first R[k][k] near 0 its outputs are rounding
noise in every implementation; the tests check a full-rank A of m > n (TEST_SIZES, test_arrays) instead."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized

SIZES = {"MINI": {"m": 20, "n": 30}, "SMALL": {"m": 60, "n": 80}, "MEDIUM": {"m": 200, "n": 240}}
TOL = 1e-10
TOL32 = 1e-4  # the float build: norms through sqrt, columns divided by them: 2e-5 off float64 at MINI (CPU too)
TEST_SIZES = {"MINI": {"m": 30, "n": 20}, "SMALL": {"m": 80, "n": 60}, "MEDIUM": {"m": 240, "n": 200}}


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    k = ir.KernelBuilder("gramschmidt")
    m, n = k.var("m", 1, 1 << 14), k.var("n", 1, 1 << 14)
    a = k.param("A", dt, shape=(m, n), writable=True)
    r = k.param("R", dt, shape=(n, n), writable=True)
    q = k.param("Q", dt, shape=(m, n), writable=True)
    kk = k.range(n, "loop")
    i = k.range(m, "reduce")
    r[kk, kk] = ir.sqrt((a[i, kk] * a[i, kk]).sum(i))
    i2 = k.range(m, "loop")
    q[i2, kk] = a[i2, kk] / r[kk, kk]
    j = k.range(kk + 1, n, "loop")
    i3 = k.range(m, "reduce")
    r[kk, j] = (q[i3, kk] * a[i3, j]).sum(i3)
    i4 = k.range(m, "loop")
    a[i4, j] = a[i4, j] - q[i4, kk] * r[kk, j]
    return k.build()


def init_arrays(m: int, n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    return {"A": ((i * j % m) / m) * 100 + 10, "R": np.zeros((n, n)), "Q": np.zeros((m, n))}


def test_arrays(m: int, n: int) -> dict[str, np.ndarray]:
    """PolyBench's A plus 100 on its diagonal: full column rank, so every output is well defined."""
    d = init_arrays(m, n)
    d["A"] = d["A"] + 100 * np.eye(m, n)
    return d


def reference(A, R, Q) -> dict[str, np.ndarray]:
    """PolyBench's loops, one column at a time."""
    a, r, q = A.copy(), R.copy(), Q.copy()
    for k in range(a.shape[1]):
        r[k, k] = np.sqrt(a[:, k] @ a[:, k])
        q[:, k] = a[:, k] / r[k, k]
        r[k, k + 1:] = q[:, k] @ a[:, k + 1:]
        a[:, k + 1:] -= np.outer(q[:, k], r[k, k + 1:])
    return {"A": a, "R": r, "Q": q}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
