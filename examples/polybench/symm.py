"""PolyBench/C 4.2 symm: C = alpha * A B + beta * C with A symmetric, only its lower triangle read (A: m x m,
B, C: m x n), in place on C."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized

SIZES = {"MINI": {"m": 20, "n": 30}, "SMALL": {"m": 60, "n": 80}, "MEDIUM": {"m": 200, "n": 240}}
SCALARS = {"alpha": 1.5, "beta": 1.2}
ALPHA, BETA = SCALARS["alpha"], SCALARS["beta"]


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    """One lane per C[i, j]: row i of the symmetric A is A[i, k] for k <= i and A[k, i] for k > i, two triangular
    reductions that together do the square's work once."""
    k = ir.KernelBuilder("symm")
    m, n = k.var("m", 1, 1 << 14), k.var("n", 1, 1 << 14)
    alpha, beta = k.scalar("alpha", dt), k.scalar("beta", dt)
    a = k.param("A", dt, shape=(m, m))
    b = k.param("B", dt, shape=(m, n))
    c = k.param("C", dt, shape=(m, n), writable=True)
    i, j = k.range(m, "global"), k.range(n, "global")
    lo, hi = k.range(i + 1, kind="reduce"), k.range(i + 1, m, "reduce")
    c[i, j] = beta * c[i, j] + alpha * ((a[i, lo] * b[lo, j]).sum(lo) + (a[hi, i] * b[hi, j]).sum(hi))
    return k.build()


def init_arrays(m: int, n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array (the upper triangle of A is -999: never read)."""
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    c, b = ((i + j) % 100) / m, ((n + i - j) % 100) / m
    i, j = np.arange(m)[:, None], np.arange(m)[None, :]
    return {"A": np.where(j <= i, ((i + j) % 100) / m, -999.0), "B": b, "C": c}


def reference(A, B, C, alpha: float, beta: float) -> dict[str, np.ndarray]:
    low = np.tril(A)
    return {"C": beta * C + alpha * ((low + np.tril(low, -1).T) @ B)}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
