"""PolyBench/C 4.2 jacobi-1d: tsteps of the 3-point stencil, A -> B then B -> A (A, B: n).

One kernel, one lane per interior point (a global range of n - 2 lanes starting at 1); the time loop is a dk.Plan
of 2 * tsteps launches on resident buffers."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import data_type, main, ping_pong, sized

SIZES = {"MINI": {"tsteps": 20, "n": 30}, "SMALL": {"tsteps": 40, "n": 120}, "MEDIUM": {"tsteps": 100, "n": 400}}


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    """dst[i] = 0.33333 * (src[i-1] + src[i] + src[i+1]) for 1 <= i < n-1."""
    k = ir.KernelBuilder("jacobi_1d")
    n = k.var("n", 3, 1 << 24)
    src, dst = k.param("src", dt, n), k.param("dst", dt, n, writable=True)
    i = k.range(1, n - 1, "global")
    dst[i] = 0.33333 * (src[i - 1] + src[i] + src[i + 1])
    return k.build()


def init_arrays(n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    r = np.arange(n)
    return {"A": (r + 2) / n, "B": (r + 3) / n}


def reference(A, B, tsteps: int) -> dict[str, np.ndarray]:
    a, b = A.copy(), B.copy()
    for _ in range(tsteps):
        b[1:-1] = 0.33333 * (a[:-2] + a[1:-1] + a[2:])
        a[1:-1] = 0.33333 * (b[:-2] + b[1:-1] + b[2:])
    return {"A": a, "B": b}


def compute(device, arrs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    return ping_pong(device, kernel(data_type(arrs)), arrs, dims["tsteps"], dims["n"])
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
