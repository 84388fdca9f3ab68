"""PolyBench/C 4.2 mvt: x1 += A y_1, x2 += A^T y_2 (A: n x n)."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized

SIZES = {"MINI": {"n": 40}, "SMALL": {"n": 120}, "MEDIUM": {"n": 400}}


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    """One lane per i, both products in it."""
    k = ir.KernelBuilder("mvt")
    n = k.var("n", 1, 1 << 14)
    a = k.param("A", dt, shape=(n, n))
    y1, y2 = k.param("y_1", dt, n), k.param("y_2", dt, n)
    x1, x2 = k.param("x1", dt, n, writable=True), k.param("x2", dt, n, writable=True)
    i, j = k.range(n, "global"), k.range(n, "reduce")
    x1[i] = x1[i] + (a[i, j] * y1[j]).sum(j)
    x2[i] = x2[i] + (a[j, i] * y2[j]).sum(j)
    return k.build()


def init_arrays(n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    r = np.arange(n)
    i, j = r[:, None], r[None, :]
    return {"A": (i * j % n) / n, "x1": (r % n) / n, "x2": ((r + 1) % n) / n, "y_1": ((r + 3) % n) / n,
            "y_2": ((r + 4) % n) / n}


def reference(A, x1, x2, y_1, y_2) -> dict[str, np.ndarray]:
    return {"x1": x1 + A @ y_1, "x2": x2 + A.T @ y_2}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
