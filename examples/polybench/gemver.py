"""PolyBench/C 4.2 gemver: A += u1 v1^T + u2 v2^T; x += beta * A^T y + z; w += alpha * A x (A: n x n).

Each step reads what the one before wrote in other lanes (x reads a column of the updated A, w every updated x), so
the benchmark is three kernels launched in order, as on a GPU."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import as_device, data_type, fetch, main, resident, sized

SIZES = {"MINI": {"n": 40}, "SMALL": {"n": 120}, "MEDIUM": {"n": 400}}
SCALARS = {"alpha": 1.5, "beta": 1.2}
ALPHA, BETA = SCALARS["alpha"], SCALARS["beta"]


def kernels(dt: ir.DType = dtypes.float64) -> tuple[ir.Kernel, ir.Kernel, ir.Kernel]:
    """(rank-2 update of A, x update, w update)."""
    k = ir.KernelBuilder("gemver_a")
    n = k.var("n", 1, 1 << 14)
    a = k.param("A", dt, shape=(n, n), writable=True)
    u1, v1, u2, v2 = (k.param(nm, dt, n) for nm in ("u1", "v1", "u2", "v2"))
    i, j = k.range(n, "global"), k.range(n, "global")
    a[i, j] = a[i, j] + u1[i] * v1[j] + u2[i] * v2[j]
    ka = k.build()

    k = ir.KernelBuilder("gemver_x")
    n = k.var("n", 1, 1 << 14)
    beta = k.scalar("beta", dt)
    a = k.param("A", dt, shape=(n, n))
    y, z = k.param("y", dt, n), k.param("z", dt, n)
    x = k.param("x", dt, n, writable=True)
    i, j = k.range(n, "global"), k.range(n, "reduce")
    x[i] = x[i] + (beta * a[j, i] * y[j]).sum(j) + z[i]
    kx = k.build()

    k = ir.KernelBuilder("gemver_w")
    n = k.var("n", 1, 1 << 14)
    alpha = k.scalar("alpha", dt)
    a, x = k.param("A", dt, shape=(n, n)), k.param("x", dt, n)
    w = k.param("w", dt, n, writable=True)
    i, j = k.range(n, "global"), k.range(n, "reduce")
    w[i] = w[i] + (alpha * a[i, j] * x[j]).sum(j)
    return ka, kx, k.build()


def init_arrays(n: int) -> dict[str, np.ndarray]:
    f = (np.arange(n) + 1) / n
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return {"A": (i * j % n) / n, "u1": np.arange(n, dtype=np.float64), "u2": f / 2.0, "v1": f / 4.0,
            "v2": f / 6.0, "y": f / 8.0, "z": f / 9.0, "x": np.zeros(n), "w": np.zeros(n)}


def reference(A, u1, v1, u2, v2, y, z, x, w, alpha: float, beta: float) -> dict[str, np.ndarray]:
    a = A + np.outer(u1, v1) + np.outer(u2, v2)
    x = x + beta * (a.T @ y) + z
    return {"A": a, "x": x, "w": w + alpha * (a @ x)}


def compute(device, arrs: dict[str, np.ndarray], dims: dict[str, int], alpha: float = ALPHA,
            beta: float = BETA) -> dict[str, np.ndarray]:
    """The three kernels on `device`, in order, on resident buffers (what bench/polybench.py times)."""
    dev = as_device(device)
    ka, kx, kw = (dev.compile(x) for x in kernels(data_type(arrs)))
    b, n = resident(dev, arrs), dims["n"]
    ka(A=b["A"], u1=b["u1"], v1=b["v1"], u2=b["u2"], v2=b["v2"], n=n)
    kx(A=b["A"], y=b["y"], z=b["z"], x=b["x"], n=n, beta=beta)
    kw(A=b["A"], x=b["x"], w=b["w"], n=n, alpha=alpha)
    return fetch(b, arrs, ("A", "x", "w"))
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
