"""PolyBench/C 4.2 jacobi-2d: tsteps of the 5-point stencil, A -> B then B -> A (A, B: n x n).

One kernel, one lane per interior point (a global range of n - 2 lanes starting at 1); the time loop is a dk.Plan
of 2 * tsteps launches on resident buffers."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import data_type, main, ping_pong, sized

SIZES = {"MINI": {"tsteps": 20, "n": 30}, "SMALL": {"tsteps": 40, "n": 90}, "MEDIUM": {"tsteps": 100, "n": 250}}


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    k = ir.KernelBuilder("jacobi_2d")
    n = k.var("n", 3, 1 << 14)
    src = k.param("src", dt, shape=(n, n))
    dst = k.param("dst", dt, shape=(n, n), writable=True)
    i, j = k.range(1, n - 1, "global"), k.range(1, n - 1, "global")
    dst[i, j] = 0.2 * (src[i, j] + src[i, j - 1] + src[i, j + 1] + src[i + 1, j] + src[i - 1, j])
    return k.build()


def init_arrays(n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return {"A": (i * (j + 2) + 2) / n, "B": (i * (j + 3) + 3) / n}


def reference(A, B, tsteps: int) -> dict[str, np.ndarray]:
    a, b = A.copy(), B.copy()
    for _ in range(tsteps):
        for s, d in ((a, b), (b, a)):
            d[1:-1, 1:-1] = 0.2 * (s[1:-1, 1:-1] + s[1:-1, :-2] + s[1:-1, 2:] + s[2:, 1:-1] + s[:-2, 1:-1])
    return {"A": a, "B": b}


def compute(device, arrs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    return ping_pong(device, kernel(data_type(arrs)), arrs, dims["tsteps"], dims["n"])
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
