"""PolyBench/C 4.2 syrk: the lower triangle of C = alpha * A A^T + beta * C (A: n x m, C: n x n), in place; the
strict upper triangle of C is left as it was."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized

SIZES = {"MINI": {"m": 20, "n": 30}, "SMALL": {"m": 60, "n": 80}, "MEDIUM": {"m": 200, "n": 240}}
SCALARS = {"alpha": 1.5, "beta": 1.2}
ALPHA, BETA = SCALARS["alpha"], SCALARS["beta"]


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    """One thread per row i, a triangular loop j <= i (the loop does only the triangle's work)."""
    k = ir.KernelBuilder("syrk")
    m, n = k.var("m", 1, 1 << 14), k.var("n", 1, 1 << 14)
    alpha, beta = k.scalar("alpha", dt), k.scalar("beta", dt)
    a = k.param("A", dt, shape=(n, m))
    c = k.param("C", dt, shape=(n, n), writable=True)
    i = k.range(n, "global")
    j = k.range(i + 1, kind="loop")
    kk = k.range(m, "reduce")
    c[i, j] = beta * c[i, j] + (alpha * a[i, kk] * a[j, kk]).sum(kk)
    return k.build()


def init_arrays(m: int, n: int) -> dict[str, np.ndarray]:
    i, j = np.arange(n)[:, None], np.arange(m)[None, :]
    a = ((i * j + 1) % n) / n
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return {"A": a, "C": ((i * j + 2) % m) / m}


def reference(A: np.ndarray, C: np.ndarray, alpha: float, beta: float) -> dict[str, np.ndarray]:
    lower = np.tril(np.ones(C.shape, bool))
    return {"C": np.where(lower, beta * C + alpha * (A @ A.T), C)}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
