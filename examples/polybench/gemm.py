"""PolyBench/C 4.2 gemm: C = alpha * A B + beta * C (A: ni x nk, B: nk x nj, C: ni x nj), in place on C."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized

SIZES = {"MINI": {"ni": 20, "nj": 25, "nk": 30}, "SMALL": {"ni": 60, "nj": 70, "nk": 80},
         "MEDIUM": {"ni": 200, "nj": 220, "nk": 240}}
SCALARS = {"alpha": 1.5, "beta": 1.2}
ALPHA, BETA = SCALARS["alpha"], SCALARS["beta"]  # PolyBench's init_array values


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    """One thread per C[i, j]: C[i][j] *= beta, then C[i][j] += alpha * A[i][k] * B[k][j] summed over k."""
    k = ir.KernelBuilder("gemm")
    ni, nj, nk = k.var("ni", 1, 1 << 14), k.var("nj", 1, 1 << 14), k.var("nk", 1, 1 << 14)
    alpha, beta = k.scalar("alpha", dt), k.scalar("beta", dt)
    a = k.param("A", dt, shape=(ni, nk))
    b = k.param("B", dt, shape=(nk, nj))
    c = k.param("C", dt, shape=(ni, nj), writable=True)
    i, j = k.range(ni, "global"), k.range(nj, "global")
    kk = k.range(nk, "reduce")
    c[i, j] = beta * c[i, j] + (alpha * a[i, kk] * b[kk, j]).sum(kk)
    return k.build()


def init_arrays(ni: int, nj: int, nk: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    i, j = np.arange(ni)[:, None], np.arange(nj)[None, :]
    c = ((i * j + 1) % ni) / ni
    i, kk = np.arange(ni)[:, None], np.arange(nk)[None, :]
    a = (i * (kk + 1) % nk) / nk
    kk, j = np.arange(nk)[:, None], np.arange(nj)[None, :]
    b = (kk * (j + 2) % nj) / nj
    return {"A": a, "B": b, "C": c}


def reference(A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float, beta: float) -> dict[str, np.ndarray]:
    return {"C": beta * C + alpha * (A @ B)}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
