"""PolyBench/C 4.2 seidel-2d: tsteps of the in-place 9-point Gauss-Seidel sweep (A: n x n).

Each point reads its new left and upper neighbours, so a sweep runs in order: one lane, PolyBench's loops over i
and j as `loop` ranges whose iterations see earlier stores. The time loop is a dk.Plan of tsteps launches: a `loop`
range over t cannot hold the sweep, since the sweep does not use t (a statement runs only in the loops it uses)."""

from __future__ import annotations

import devicekit as dk
import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import as_device, data_type, fetch, main, resident, sized

SIZES = {"MINI": {"tsteps": 20, "n": 40}, "SMALL": {"tsteps": 40, "n": 120}, "MEDIUM": {"tsteps": 100, "n": 400}}
NOTE = "the time loop is a dk.Plan: a `loop` range over t cannot hold a sweep that does not use t"


def kernel(dt: ir.DType = dtypes.float64) -> ir.Kernel:
    k = ir.KernelBuilder("seidel_2d")
    n = k.var("n", 3, 1 << 14)
    a = k.param("A", dt, shape=(n, n), writable=True)
    i, j = k.range(1, n - 1, "loop"), k.range(1, n - 1, "loop")
    a[i, j] = (a[i - 1, j - 1] + a[i - 1, j] + a[i - 1, j + 1] + a[i, j - 1] + a[i, j] + a[i, j + 1]
               + a[i + 1, j - 1] + a[i + 1, j] + a[i + 1, j + 1]) / 9.0
    return k.build()


def init_arrays(n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return {"A": (i * (j + 2) + 2) / n}


def reference(A, tsteps: int) -> dict[str, np.ndarray]:
    """A wavefront per time step: the points with 2i + j = w depend only on smaller w (new values) and read larger
    w (old ones), so each such diagonal is one vector update in PolyBench's order."""
    a, n = A.copy(), len(A)
    for _ in range(tsteps):
        for w in range(3, 3 * (n - 2) + 1):
            i = np.arange(max(1, (w - (n - 2) + 1) // 2), min(n - 2, (w - 1) // 2) + 1)
            j = w - 2 * i
            a[i, j] = (a[i - 1, j - 1] + a[i - 1, j] + a[i - 1, j + 1] + a[i, j - 1] + a[i, j] + a[i, j + 1]
                       + a[i + 1, j - 1] + a[i + 1, j] + a[i + 1, j + 1]) / 9.0
    return {"A": a}


def compute(device, arrs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    dev = as_device(device)
    sweep = dev.compile(kernel(data_type(arrs)))
    b = resident(dev, arrs)
    plan = dk.Plan(dev)
    for _ in range(dims["tsteps"]):
        plan.add(sweep, A=b["A"], n=dims["n"])
    plan.run()
    return fetch(b, arrs, ("A",))
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
