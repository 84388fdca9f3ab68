"""PolyBench/C 4.2 gesummv: tmp = A x, y = alpha * tmp + beta * B x (A, B: n x n)."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized

SIZES = {"MINI": {"n": 30}, "SMALL": {"n": 90}, "MEDIUM": {"n": 250}}
SCALARS = {"alpha": 1.5, "beta": 1.2}
ALPHA, BETA = SCALARS["alpha"], SCALARS["beta"]


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    """One thread per row: both row sums share one loop over j (two accumulators)."""
    k = ir.KernelBuilder("gesummv")
    n = k.var("n", 1, 1 << 14)
    alpha, beta = k.scalar("alpha", dt), k.scalar("beta", dt)
    a, b = k.param("A", dt, shape=(n, n)), k.param("B", dt, shape=(n, n))
    x = k.param("x", dt, n)
    tmp, y = k.param("tmp", dt, n, writable=True), k.param("y", dt, n, writable=True)
    i, j = k.range(n, "global"), k.range(n, "reduce")
    t = (a[i, j] * x[j]).sum(j)
    tmp[i] = t
    y[i] = alpha * t + beta * (b[i, j] * x[j]).sum(j)
    return k.build()


def init_arrays(n: int) -> dict[str, np.ndarray]:
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return {"A": ((i * j + 1) % n) / n, "B": ((i * j + 2) % n) / n, "x": (np.arange(n) % n) / n}


def reference(A: np.ndarray, B: np.ndarray, x: np.ndarray, alpha: float, beta: float) -> dict[str, np.ndarray]:
    tmp = A @ x
    return {"tmp": tmp, "y": alpha * tmp + beta * (B @ x)}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
