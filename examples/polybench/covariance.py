"""PolyBench/C 4.2 covariance: the covariance matrix of data's columns (data: n x m, cov: m x m); data is
centred in place.

Two launches: the column means and centring (one lane per column), then cov (one lane per row i, a triangular
loop j >= i that stores cov[i][j] and its mirror cov[j][i])."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import as_device, data_type, fetch, main, resident, sized

SIZES = {"MINI": {"m": 28, "n": 32}, "SMALL": {"m": 80, "n": 100}, "MEDIUM": {"m": 240, "n": 260}}
TOL = 1e-10


def kernels(dt: ir.DType = dtypes.float64) -> tuple[ir.Kernel, ir.Kernel]:
    k = ir.KernelBuilder("covariance_cols")
    m, n = k.var("m", 1, 1 << 14), k.var("n", 1, 1 << 14)
    data = k.param("data", dt, shape=(n, m), writable=True)
    mean = k.param("mean", dt, m, writable=True)
    j = k.range(m, "global")
    i = k.range(n, "reduce")
    mean[j] = data[i, j].sum(i) / n.cast(dt)
    i2 = k.range(n, "loop")
    data[i2, j] = data[i2, j] - mean[j]
    kc = k.build()

    k = ir.KernelBuilder("covariance_cov")
    m, n = k.var("m", 1, 1 << 14), k.var("n", 2, 1 << 14)
    data = k.param("data", dt, shape=(n, m))
    cov = k.param("cov", dt, shape=(m, m), writable=True)
    i = k.range(m, "global")
    j = k.range(i, m, "loop")
    kk = k.range(n, "reduce")
    c = (data[kk, i] * data[kk, j]).sum(kk) / (n.cast(dt) - 1.0)
    cov[i, j] = c
    cov[j, i] = c
    return kc, k.build()


def init_arrays(m: int, n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    i, j = np.arange(n)[:, None], np.arange(m)[None, :]
    return {"data": (i * j) / m, "mean": np.zeros(m), "cov": np.zeros((m, m))}


def reference(data, mean, cov) -> dict[str, np.ndarray]:
    mu = data.mean(axis=0)
    d = data - mu
    return {"data": d, "mean": mu, "cov": d.T @ d / (data.shape[0] - 1.0)}


def compute(device, arrs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    dev = as_device(device)
    kc, kv = (dev.compile(x) for x in kernels(data_type(arrs)))
    b = resident(dev, arrs)
    kc(data=b["data"], mean=b["mean"], **dims)
    kv(data=b["data"], cov=b["cov"], **dims)
    return fetch(b, arrs, ("data", "mean", "cov"))
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
