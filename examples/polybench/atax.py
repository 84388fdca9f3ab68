"""PolyBench/C 4.2 atax: y = A^T (A x) (A: m x n), through PolyBench's tmp = A x.

y[j] needs every element of tmp, so tmp and y are two launches."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import as_device, data_type, fetch, main, resident, sized

SIZES = {"MINI": {"m": 38, "n": 42}, "SMALL": {"m": 116, "n": 124}, "MEDIUM": {"m": 390, "n": 410}}


def kernels(dt: ir.DType = dtypes.float64) -> tuple[ir.Kernel, ir.Kernel]:
    """(tmp = A x, one lane per row; y = A^T tmp, one lane per column)."""
    k = ir.KernelBuilder("atax_tmp")
    m, n = k.var("m", 1, 1 << 14), k.var("n", 1, 1 << 14)
    a, x = k.param("A", dt, shape=(m, n)), k.param("x", dt, n)
    tmp = k.param("tmp", dt, m, writable=True)
    i, j = k.range(m, "global"), k.range(n, "reduce")
    tmp[i] = (a[i, j] * x[j]).sum(j)
    kt = k.build()

    k = ir.KernelBuilder("atax_y")
    m, n = k.var("m", 1, 1 << 14), k.var("n", 1, 1 << 14)
    a, tmp = k.param("A", dt, shape=(m, n)), k.param("tmp", dt, m)
    y = k.param("y", dt, n, writable=True)
    j, i = k.range(n, "global"), k.range(m, "reduce")
    y[j] = (a[i, j] * tmp[i]).sum(i)
    return kt, k.build()


def init_arrays(m: int, n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    return {"A": ((i + j) % n) / (5 * m), "x": 1 + np.arange(n) / n, "tmp": np.zeros(m), "y": np.zeros(n)}


def reference(A, x, tmp, y) -> dict[str, np.ndarray]:
    t = A @ x
    return {"tmp": t, "y": A.T @ t}


def compute(device, arrs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    dev = as_device(device)
    kt, ky = (dev.compile(x) for x in kernels(data_type(arrs)))
    b = resident(dev, arrs)
    kt(A=b["A"], x=b["x"], tmp=b["tmp"], **dims)
    ky(A=b["A"], tmp=b["tmp"], y=b["y"], **dims)
    return fetch(b, arrs, ("tmp", "y"))
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
