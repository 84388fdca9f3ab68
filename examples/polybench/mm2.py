"""PolyBench/C 4.2 2mm: tmp = alpha * A B, D = tmp C + beta * D (A: ni x nk, B: nk x nj, C: nj x nl, D: ni x nl)."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized

SIZES = {"MINI": {"ni": 16, "nj": 18, "nk": 22, "nl": 24}, "SMALL": {"ni": 40, "nj": 50, "nk": 70, "nl": 80},
         "MEDIUM": {"ni": 180, "nj": 190, "nk": 210, "nl": 220}}
SCALARS = {"alpha": 1.5, "beta": 1.2}
ALPHA, BETA = SCALARS["alpha"], SCALARS["beta"]


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    """One lane per row i: its row of tmp (a loop over j), then its row of D, which reads only that row of tmp."""
    k = ir.KernelBuilder("mm2")
    ni, nj, nk, nl = (k.var(v, 1, 1 << 14) for v in ("ni", "nj", "nk", "nl"))
    alpha, beta = k.scalar("alpha", dt), k.scalar("beta", dt)
    a = k.param("A", dt, shape=(ni, nk))
    b = k.param("B", dt, shape=(nk, nj))
    c = k.param("C", dt, shape=(nj, nl))
    d = k.param("D", dt, shape=(ni, nl), writable=True)
    tmp = k.param("tmp", dt, shape=(ni, nj), writable=True)
    i = k.range(ni, "global")
    j, kk = k.range(nj, "loop"), k.range(nk, "reduce")
    tmp[i, j] = (alpha * a[i, kk] * b[kk, j]).sum(kk)
    l, jj = k.range(nl, "loop"), k.range(nj, "reduce")
    d[i, l] = beta * d[i, l] + (tmp[i, jj] * c[jj, l]).sum(jj)
    return k.build()


def init_arrays(ni: int, nj: int, nk: int, nl: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    g = lambda r, c: (np.arange(r)[:, None], np.arange(c)[None, :])
    i, kk = g(ni, nk)
    a = ((i * kk + 1) % ni) / ni
    kk, j = g(nk, nj)
    b = (kk * (j + 1) % nj) / nj
    j, l = g(nj, nl)
    c = ((j * (l + 3) + 1) % nl) / nl
    i, l = g(ni, nl)
    return {"A": a, "B": b, "C": c, "D": (i * (l + 2) % nk) / nk, "tmp": np.zeros((ni, nj))}


def reference(A, B, C, D, tmp, alpha: float, beta: float) -> dict[str, np.ndarray]:
    t = alpha * (A @ B)
    return {"tmp": t, "D": beta * D + t @ C}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
