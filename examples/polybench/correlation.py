"""PolyBench/C 4.2 correlation: the correlation matrix of data's columns (data: n x m, corr: m x m); data is
normalised in place.

Two launches: the column statistics and normalisation (one lane per column), then corr (one lane per row i, a
triangular loop j > i that stores corr[i][j] and its mirror corr[j][i])."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import as_device, data_type, fetch, main, resident, sized

SIZES = {"MINI": {"m": 28, "n": 32}, "SMALL": {"m": 80, "n": 100}, "MEDIUM": {"m": 240, "n": 260}}
TOL = 1e-10
EPS = 0.1  # PolyBench's eps: a column whose stddev is below it is left unscaled


def kernels(dt: ir.DType = dtypes.float64) -> tuple[ir.Kernel, ir.Kernel]:
    k = ir.KernelBuilder("correlation_cols")
    m, n = k.var("m", 1, 1 << 14), k.var("n", 1, 1 << 14)
    data = k.param("data", dt, shape=(n, m), writable=True)
    mean, sd = k.param("mean", dt, m, writable=True), k.param("stddev", dt, m, writable=True)
    fn = n.cast(dt)  # PolyBench's float_n
    j = k.range(m, "global")
    i = k.range(n, "reduce")
    mean[j] = data[i, j].sum(i) / fn
    i2 = k.range(n, "reduce")
    s = ir.sqrt(((data[i2, j] - mean[j]) * (data[i2, j] - mean[j])).sum(i2) / fn)
    sd[j] = ir.where(s <= EPS, 1.0, s)
    i3 = k.range(n, "loop")
    data[i3, j] = (data[i3, j] - mean[j]) / (ir.sqrt(fn) * sd[j])
    kc = k.build()

    k = ir.KernelBuilder("correlation_corr")
    m, n = k.var("m", 1, 1 << 14), k.var("n", 1, 1 << 14)
    data = k.param("data", dt, shape=(n, m))
    corr = k.param("corr", dt, shape=(m, m), writable=True)
    i = k.range(m, "global")
    corr[i, i] = 1.0
    j = k.range(i + 1, m, "loop")
    kk = k.range(n, "reduce")
    c = (data[kk, i] * data[kk, j]).sum(kk)
    corr[i, j] = c
    corr[j, i] = c
    return kc, k.build()


def init_arrays(m: int, n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    i, j = np.arange(n)[:, None], np.arange(m)[None, :]
    return {"data": (i * j) / m + i, "mean": np.zeros(m), "stddev": np.zeros(m), "corr": np.zeros((m, m))}


def reference(data, mean, stddev, corr) -> dict[str, np.ndarray]:
    n = data.shape[0]
    mu = data.mean(axis=0)
    s = np.sqrt(((data - mu) ** 2).sum(axis=0) / n)
    s = np.where(s <= EPS, 1.0, s)
    d = (data - mu) / (np.sqrt(n) * s)
    c = d.T @ d
    np.fill_diagonal(c, 1.0)
    return {"data": d, "mean": mu, "stddev": s, "corr": c}


def compute(device, arrs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    dev = as_device(device)
    kc, kr = (dev.compile(x) for x in kernels(data_type(arrs)))
    b = resident(dev, arrs)
    kc(data=b["data"], mean=b["mean"], stddev=b["stddev"], **dims)
    kr(data=b["data"], corr=b["corr"], **dims)
    return fetch(b, arrs, ("data", "mean", "stddev", "corr"))
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
