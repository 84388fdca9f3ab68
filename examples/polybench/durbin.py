"""PolyBench/C 4.2 durbin: the Levinson-Durbin recursion for the Toeplitz system of r (r, y: n).

Not written directly: PolyBench carries two scalars from one step k to the next (alpha and beta). alpha is y[k-1]
(the step before stored it there), but beta has no home in PolyBench's arrays, and the IR has no per-lane value
that persists across a `loop` range; it lives here in a one-element param `beta`. z[n] is PolyBench's own
temporary array. One lane, steps in order."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized

SIZES = {"MINI": {"n": 40}, "SMALL": {"n": 120}, "MEDIUM": {"n": 400}}
TOL = 1e-8  # the recursion amplifies rounding: at MEDIUM (n=400) numpy, devicekit and long double differ by ~1e-9
TOL32 = 1e-3  # the float build: y[k] uses every y before it, 1.4e-4 off the float64 result at MINI (CPU too)
WORKAROUND = "beta kept in a one-element param: no per-lane value that persists across a loop range"


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    k = ir.KernelBuilder("durbin")
    n = k.var("n", 1, 1 << 14)
    r = k.param("r", dt, n)
    y, z = k.param("y", dt, n, writable=True), k.param("z", dt, n, writable=True)
    beta = k.param("beta", dt, 1, writable=True)  # the loop-carried scalar (see the module doc)
    y[0] = -r[0]
    beta[0] = 1.0
    kk = k.range(1, n, "loop")
    alpha = y[kk - 1]
    beta[0] = (1.0 - alpha * alpha) * beta[0]
    i = k.range(kk, "reduce")
    y[kk] = -(r[kk] + (r[kk - i - 1] * y[i]).sum(i)) / beta[0]  # alpha of this step, stored where PolyBench ends it
    i2 = k.range(kk, "loop")
    z[i2] = y[i2] + y[kk] * y[kk - i2 - 1]
    i3 = k.range(kk, "loop")
    y[i3] = z[i3]
    return k.build()


def init_arrays(n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    return {"r": (n + 1 - np.arange(n)).astype(np.float64), "y": np.zeros(n), "z": np.zeros(n),
            "beta": np.zeros(1)}


def reference(r, y, z, beta) -> dict[str, np.ndarray]:
    """PolyBench's loops, the inner ones vectorized."""
    n = len(r)
    y = np.zeros(n)
    y[0] = -r[0]
    b, a = 1.0, -r[0]
    for k in range(1, n):
        b = (1 - a * a) * b
        a = -(r[k] + r[k - 1::-1][:k] @ y[:k]) / b
        y[:k] = y[:k] + a * y[k - 1::-1][:k]
        y[k] = a
    return {"y": y}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
