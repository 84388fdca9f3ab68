"""PolyBench/C 4.2 3mm: E = A B, F = C D, G = E F (A: ni x nk, B: nk x nj, C: nj x nm, D: nm x nl).

G needs every row of F, so F is its own launch; E and G then run per row of E in one kernel."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import as_device, data_type, fetch, main, resident, sized

SIZES = {"MINI": {"ni": 16, "nj": 18, "nk": 20, "nl": 22, "nm": 24},
         "SMALL": {"ni": 40, "nj": 50, "nk": 60, "nl": 70, "nm": 80},
         "MEDIUM": {"ni": 180, "nj": 190, "nk": 200, "nl": 210, "nm": 220}}


def kernels(dt: ir.DType = dtypes.float64) -> tuple[ir.Kernel, ir.Kernel]:
    """(F = C D, one lane per (j, l); E and G, one lane per row i)."""
    k = ir.KernelBuilder("mm3_f")
    nj, nl, nm = (k.var(v, 1, 1 << 14) for v in ("nj", "nl", "nm"))
    c, d = k.param("C", dt, shape=(nj, nm)), k.param("D", dt, shape=(nm, nl))
    f = k.param("F", dt, shape=(nj, nl), writable=True)
    j, l, m = k.range(nj, "global"), k.range(nl, "global"), k.range(nm, "reduce")
    f[j, l] = (c[j, m] * d[m, l]).sum(m)
    kf = k.build()

    k = ir.KernelBuilder("mm3_eg")
    ni, nj, nk, nl = (k.var(v, 1, 1 << 14) for v in ("ni", "nj", "nk", "nl"))
    a, b = k.param("A", dt, shape=(ni, nk)), k.param("B", dt, shape=(nk, nj))
    f = k.param("F", dt, shape=(nj, nl))
    e = k.param("E", dt, shape=(ni, nj), writable=True)
    g = k.param("G", dt, shape=(ni, nl), writable=True)
    i = k.range(ni, "global")
    j, kk = k.range(nj, "loop"), k.range(nk, "reduce")
    e[i, j] = (a[i, kk] * b[kk, j]).sum(kk)
    l, jj = k.range(nl, "loop"), k.range(nj, "reduce")
    g[i, l] = (e[i, jj] * f[jj, l]).sum(jj)
    return kf, k.build()


def init_arrays(ni: int, nj: int, nk: int, nl: int, nm: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    g = lambda r, c: (np.arange(r)[:, None], np.arange(c)[None, :])
    i, j = g(ni, nk)
    a = ((i * j + 1) % ni) / (5 * ni)
    i, j = g(nk, nj)
    b = ((i * (j + 1) + 2) % nj) / (5 * nj)
    i, j = g(nj, nm)
    c = (i * (j + 3) % nl) / (5 * nl)
    i, j = g(nm, nl)
    d = ((i * (j + 2) + 2) % nk) / (5 * nk)
    return {"A": a, "B": b, "C": c, "D": d, "E": np.zeros((ni, nj)), "F": np.zeros((nj, nl)),
            "G": np.zeros((ni, nl))}


def reference(A, B, C, D, E, F, G) -> dict[str, np.ndarray]:
    e, f = A @ B, C @ D
    return {"E": e, "F": f, "G": e @ f}


def compute(device, arrs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    dev = as_device(device)
    kf, keg = (dev.compile(x) for x in kernels(data_type(arrs)))
    b = resident(dev, arrs)
    kf(C=b["C"], D=b["D"], F=b["F"], nj=dims["nj"], nl=dims["nl"], nm=dims["nm"])
    keg(A=b["A"], B=b["B"], F=b["F"], E=b["E"], G=b["G"], ni=dims["ni"], nj=dims["nj"], nk=dims["nk"],
        nl=dims["nl"])
    return fetch(b, arrs, ("E", "F", "G"))
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
