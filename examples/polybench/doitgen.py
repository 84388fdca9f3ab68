"""PolyBench/C 4.2 doitgen: A[r, q, :] = A[r, q, :] C4 for every (r, q), in place (A: nr x nq x np, C4: np x np).

PolyBench's temporary sum[np] holds one row while it is overwritten; with one lane per r it is one row per lane
(sum: nr x np), so the lanes never share it."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized

SIZES = {"MINI": {"nq": 8, "nr": 10, "np": 12}, "SMALL": {"nq": 20, "nr": 25, "np": 30},
         "MEDIUM": {"nq": 40, "nr": 50, "np": 60}}
NOTE = "PolyBench's temporary sum[np] is one row per lane r: sum[nr][np]"


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    """One lane per r, a loop over q: the row product into sum[r, :], then copied back into A[r, q, :]."""
    k = ir.KernelBuilder("doitgen")
    nq, nr, np_ = (k.var(v, 1, 1 << 12) for v in ("nq", "nr", "np"))
    a = k.param("A", dt, shape=(nr, nq, np_), writable=True)
    c4 = k.param("C4", dt, shape=(np_, np_))
    s = k.param("sum", dt, shape=(nr, np_), writable=True)
    r, q = k.range(nr, "global"), k.range(nq, "loop")
    p, ss = k.range(np_, "loop"), k.range(np_, "reduce")
    s[r, p] = (a[r, q, ss] * c4[ss, p]).sum(ss)
    p2 = k.range(np_, "loop")
    a[r, q, p2] = s[r, p2]
    return k.build()


def init_arrays(nq: int, nr: int, np: int) -> dict[str, numpy.ndarray]:  # noqa: F821 - np is PolyBench's size
    """PolyBench's init_array."""
    import numpy
    i, j, kk = numpy.ix_(numpy.arange(nr), numpy.arange(nq), numpy.arange(np))
    a = ((i * j + kk) % np) / np
    i, j = numpy.arange(np)[:, None], numpy.arange(np)[None, :]
    return {"A": a, "C4": (i * j % np) / np, "sum": numpy.zeros((nr, np))}


def reference(A, C4, sum) -> dict[str, np.ndarray]:
    out = A @ C4
    return {"A": out, "sum": out[:, -1, :]}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
