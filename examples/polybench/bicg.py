"""PolyBench/C 4.2 bicg: s = A^T r, q = A p (A: n x m): two statements over independent iteration spaces."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized

SIZES = {"MINI": {"m": 38, "n": 42}, "SMALL": {"m": 116, "n": 124}, "MEDIUM": {"m": 390, "n": 410}}


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    """s[j] over lanes j and q[i] over lanes i in one kernel: no statement uses both, so each space runs once
    (docs/ir.md, Independent iteration spaces)."""
    k = ir.KernelBuilder("bicg")
    m, n = k.var("m", 1, 1 << 14), k.var("n", 1, 1 << 14)
    a = k.param("A", dt, shape=(n, m))
    p, r = k.param("p", dt, m), k.param("r", dt, n)
    s, q = k.param("s", dt, m, writable=True), k.param("q", dt, n, writable=True)
    j, i = k.range(m, "global"), k.range(n, "reduce")
    s[j] = (r[i] * a[i, j]).sum(i)
    i2, j2 = k.range(n, "global"), k.range(m, "reduce")
    q[i2] = (a[i2, j2] * p[j2]).sum(j2)
    return k.build()


def init_arrays(m: int, n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    i, j = np.arange(n)[:, None], np.arange(m)[None, :]
    return {"A": (i * (j + 1) % n) / n, "p": (np.arange(m) % m) / m, "r": (np.arange(n) % n) / n,
            "s": np.zeros(m), "q": np.zeros(n)}


def reference(A, p, r, s, q) -> dict[str, np.ndarray]:
    return {"s": A.T @ r, "q": A @ p}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
