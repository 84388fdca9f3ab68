"""PolyBench/C 4.2 trmm: B = alpha * A^T B with A unit lower triangular (A: m x m, B: m x n), in place on B."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized

SIZES = {"MINI": {"m": 20, "n": 30}, "SMALL": {"m": 60, "n": 80}, "MEDIUM": {"m": 200, "n": 240}}
SCALARS = {"alpha": 1.5}
ALPHA = SCALARS["alpha"]


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    """One lane per column j (columns are independent), rows i in order: B[i, j] reads rows k > i of its column,
    which this lane has not yet overwritten, through a triangular reduction."""
    k = ir.KernelBuilder("trmm")
    m, n = k.var("m", 1, 1 << 14), k.var("n", 1, 1 << 14)
    alpha = k.scalar("alpha", dt)
    a = k.param("A", dt, shape=(m, m))
    b = k.param("B", dt, shape=(m, n), writable=True)
    j = k.range(n, "global")
    i = k.range(m, "loop")
    kk = k.range(i + 1, m, "reduce")
    b[i, j] = alpha * (b[i, j] + (a[kk, i] * b[kk, j]).sum(kk))
    return k.build()


def init_arrays(m: int, n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array (A's upper triangle is never read: zero here)."""
    i, j = np.arange(m)[:, None], np.arange(m)[None, :]
    a = np.where(j < i, ((i + j) % m) / m, 0.0) + np.eye(m)
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    return {"A": a, "B": ((n + (i - j)) % n) / n}


def reference(A, B, alpha: float) -> dict[str, np.ndarray]:
    return {"B": alpha * ((np.tril(A, -1) + np.eye(len(A))).T @ B)}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
