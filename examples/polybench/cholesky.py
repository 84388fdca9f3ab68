"""PolyBench/C 4.2 cholesky: A = L L^T in place, L in the lower triangle (A: n x n, symmetric positive definite).

Every row needs all rows above it finished, so the kernel is one lane running PolyBench's loops in order: `loop`
ranges whose iterations see the stores of earlier ones (docs/ir.md, Memory order and loops)."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized

SIZES = {"MINI": {"n": 40}, "SMALL": {"n": 120}, "MEDIUM": {"n": 400}}
TOL = 1e-10


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    """for i: for j < i: A[i][j] = (A[i][j] - sum_k<j A[i][k] A[j][k]) / A[j][j]; A[i][i] = sqrt(A[i][i] - ...)."""
    k = ir.KernelBuilder("cholesky")
    n = k.var("n", 1, 1 << 14)
    a = k.param("A", dt, shape=(n, n), writable=True)
    i = k.range(n, "loop")
    j = k.range(i, "loop")
    kk = k.range(j, "reduce")
    a[i, j] = (a[i, j] - (a[i, kk] * a[j, kk]).sum(kk)) / a[j, j]
    k2 = k.range(i, "reduce")
    a[i, i] = ir.sqrt(a[i, i] - (a[i, k2] * a[i, k2]).sum(k2))
    return k.build()


def spd(n: int) -> np.ndarray:
    """PolyBench's positive definite matrix of lu, ludcmp and cholesky: L L^T with L[i][j] = (-j % n) / n + 1 (C's
    remainder) below the diagonal and 1 on it."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    low = np.where(j < i, np.fmod(-j, n) / n + 1, 0.0) + np.eye(n)
    return low @ low.T


def init_arrays(n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    return {"A": spd(n)}


def reference(A) -> dict[str, np.ndarray]:
    """PolyBench's loops, a row at a time."""
    a = A.copy()
    for i in range(len(a)):
        for j in range(i):
            a[i, j] = (a[i, j] - a[i, :j] @ a[j, :j]) / a[j, j]
        a[i, i] = np.sqrt(a[i, i] - a[i, :i] @ a[i, :i])
    return {"A": a}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
