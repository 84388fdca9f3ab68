"""PolyBench/C 4.2 lu: A = L U in place, Doolittle without pivoting (A: n x n).

One lane running PolyBench's loops in order (`loop` ranges see earlier iterations' stores)."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized
from .cholesky import spd

SIZES = {"MINI": {"n": 40}, "SMALL": {"n": 120}, "MEDIUM": {"n": 400}}
TOL = 1e-10


def factor(k: ir.KernelBuilder, n, a) -> None:
    """The LU statements into builder `k` (ludcmp reuses them): row i's L part, then its U part."""
    i = k.range(n, "loop")
    j = k.range(i, "loop")
    kk = k.range(j, "reduce")
    a[i, j] = (a[i, j] - (a[i, kk] * a[kk, j]).sum(kk)) / a[j, j]
    j2 = k.range(i, n, "loop")
    k2 = k.range(i, "reduce")
    a[i, j2] = a[i, j2] - (a[i, k2] * a[k2, j2]).sum(k2)


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    k = ir.KernelBuilder("lu")
    n = k.var("n", 1, 1 << 14)
    a = k.param("A", dt, shape=(n, n), writable=True)
    factor(k, n, a)
    return k.build()


def init_arrays(n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    return {"A": spd(n)}


def lu_reference(a: np.ndarray) -> np.ndarray:
    """PolyBench's loops, a row at a time, in place on `a`."""
    for i in range(len(a)):
        for j in range(i):
            a[i, j] = (a[i, j] - a[i, :j] @ a[:j, j]) / a[j, j]
        a[i, i:] = a[i, i:] - a[i, :i] @ a[:i, i:]
    return a


def reference(A) -> dict[str, np.ndarray]:
    return {"A": lu_reference(A.copy())}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
