"""PolyBench/C 4.2 heat-3d: tsteps of the 7-point heat stencil, A -> B then B -> A (A, B: n x n x n).

One kernel, one lane per interior point (a global range of n - 2 lanes starting at 1); the time loop is a dk.Plan
of 2 * tsteps launches on resident buffers."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import data_type, main, ping_pong, sized

SIZES = {"MINI": {"tsteps": 20, "n": 10}, "SMALL": {"tsteps": 40, "n": 20}, "MEDIUM": {"tsteps": 100, "n": 40}}


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    k = ir.KernelBuilder("heat_3d")
    n = k.var("n", 3, 1 << 10)
    src = k.param("src", dt, shape=(n, n, n))
    dst = k.param("dst", dt, shape=(n, n, n), writable=True)
    i, j, kk = (k.range(1, n - 1, "global") for _ in range(3))
    c = src[i, j, kk]
    dst[i, j, kk] = (0.125 * (src[i + 1, j, kk] - 2.0 * c + src[i - 1, j, kk])
                     + 0.125 * (src[i, j + 1, kk] - 2.0 * c + src[i, j - 1, kk])
                     + 0.125 * (src[i, j, kk + 1] - 2.0 * c + src[i, j, kk - 1]) + c)
    return k.build()


def init_arrays(n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    i, j, kk = np.ix_(np.arange(n), np.arange(n), np.arange(n))
    a = (i + j + (n - kk)) * 10 / n
    return {"A": a.astype(np.float64), "B": a.astype(np.float64)}


def test_arrays(n: int) -> dict[str, np.ndarray]:
    """PolyBench's A is linear in i, j, k, which the stencil leaves as it is (a check of it would be vacuous): the
    tests add a fixed pseudo-random field."""
    d = init_arrays(n)
    noise = np.random.default_rng(3).standard_normal((n, n, n))
    return {"A": d["A"] + noise, "B": d["B"] + noise}


def reference(A, B, tsteps: int) -> dict[str, np.ndarray]:
    a, b = A.copy(), B.copy()
    m = slice(1, -1)
    for _ in range(tsteps):
        for s, d in ((a, b), (b, a)):
            c = s[m, m, m]
            d[m, m, m] = (0.125 * (s[2:, m, m] - 2.0 * c + s[:-2, m, m]) + 0.125 * (s[m, 2:, m] - 2.0 * c + s[m, :-2, m])
                          + 0.125 * (s[m, m, 2:] - 2.0 * c + s[m, m, :-2]) + c)
    return {"A": a, "B": b}


def compute(device, arrs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    return ping_pong(device, kernel(data_type(arrs)), arrs, dims["tsteps"], dims["n"])
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
