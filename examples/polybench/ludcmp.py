"""PolyBench/C 4.2 ludcmp: A = L U in place, then L y = b and U x = y by substitution (A: n x n).

One lane running PolyBench's three loop nests in order; the back substitution runs i = n-1 down to 0."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized
from .cholesky import spd
from .lu import factor, lu_reference

SIZES = {"MINI": {"n": 40}, "SMALL": {"n": 120}, "MEDIUM": {"n": 400}}
TOL = 1e-10


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    k = ir.KernelBuilder("ludcmp")
    n = k.var("n", 1, 1 << 14)
    a = k.param("A", dt, shape=(n, n), writable=True)
    b = k.param("b", dt, n)
    x, y = k.param("x", dt, n, writable=True), k.param("y", dt, n, writable=True)
    factor(k, n, a)
    i = k.range(n, "loop")
    j = k.range(i, "reduce")
    y[i] = b[i] - (a[i, j] * y[j]).sum(j)
    ii = k.range(n, "loop")
    i = n - 1 - ii
    j = k.range(i + 1, n, "reduce")
    x[i] = (y[i] - (a[i, j] * x[j]).sum(j)) / a[i, i]
    return k.build()


def init_arrays(n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    return {"A": spd(n), "b": (np.arange(n) + 1) / n / 2.0 + 4, "x": np.zeros(n), "y": np.zeros(n)}


def reference(A, b, x, y) -> dict[str, np.ndarray]:
    a, n = lu_reference(A.copy()), len(b)
    y = np.zeros(n)
    for i in range(n):
        y[i] = b[i] - a[i, :i] @ y[:i]
    x = np.zeros(n)
    for i in range(n - 1, -1, -1):
        x[i] = (y[i] - a[i, i + 1:] @ x[i + 1:]) / a[i, i]
    return {"A": a, "x": x, "y": y}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
