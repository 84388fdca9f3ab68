"""PolyBench/C 4.2 floyd-warshall: all-pairs shortest paths in place (path: n x n, int).

Step k reads row k and column k, which step k writes, so the kernel is one lane running PolyBench's three loops in
order (`loop` ranges see earlier iterations' stores); a parallel step would read elements other lanes store."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized

SIZES = {"MINI": {"n": 60}, "SMALL": {"n": 180}, "MEDIUM": {"n": 500}}


def kernel() -> ir.Kernel:
    k = ir.KernelBuilder("floyd_warshall")
    n = k.var("n", 1, 1 << 14)
    path = k.param("path", dtypes.int32, shape=(n, n), writable=True)
    kk, i, j = k.range(n, "loop"), k.range(n, "loop"), k.range(n, "loop")
    path[i, j] = ir.minimum(path[i, j], path[i, kk] + path[kk, j])
    return k.build()


def init_arrays(n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    s = i + j
    far = (s % 13 == 0) | (s % 7 == 0) | (s % 11 == 0)
    return {"path": np.where(far, 999, i * j % 7 + 1).astype(np.int32)}


def reference(path) -> dict[str, np.ndarray]:
    """Step k at once: row k and column k do not change in step k (path[k][k] >= 0)."""
    p = path.copy()
    for k in range(len(p)):
        p = np.minimum(p, p[:, k:k + 1] + p[k:k + 1, :])
    return {"path": p}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
