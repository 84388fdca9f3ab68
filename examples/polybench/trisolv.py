"""PolyBench/C 4.2 trisolv: solve L x = b by forward substitution (L: n x n lower triangular).

One lane, rows in order: x[i] reads the x[j < i] that earlier iterations of the `loop` range stored."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized

SIZES = {"MINI": {"n": 40}, "SMALL": {"n": 120}, "MEDIUM": {"n": 400}}
TOL = 1e-10


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    k = ir.KernelBuilder("trisolv")
    n = k.var("n", 1, 1 << 14)
    lmat, b = k.param("L", dt, shape=(n, n)), k.param("b", dt, n)
    x = k.param("x", dt, n, writable=True)
    i = k.range(n, "loop")
    j = k.range(i, "reduce")
    x[i] = (b[i] - (lmat[i, j] * x[j]).sum(j)) / lmat[i, i]
    return k.build()


def init_arrays(n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array (the upper triangle of L is never read: zero here)."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return {"L": np.where(j <= i, (i + n - j + 1) * 2 / n, 0.0), "b": np.arange(n, dtype=np.float64),
            "x": np.full(n, -999.0)}


def reference(L, b, x) -> dict[str, np.ndarray]:
    x = np.zeros(len(b))
    for i in range(len(b)):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return {"x": x}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
