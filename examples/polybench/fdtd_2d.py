"""PolyBench/C 4.2 fdtd-2d: tmax steps of the 2D finite-difference time-domain kernel (ex, ey, hz: nx x ny;
_fict_: tmax).

Per step two launches: ey and ex from hz (one lane per element; ey's row 0 takes _fict_[t], ex's column 0 is not
updated: a gated store), then hz from ex and ey. The time loop is a dk.Plan of 2 * tmax launches, t a var."""

from __future__ import annotations

import devicekit as dk
import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import as_device, data_type, fetch, main, resident, sized

SIZES = {"MINI": {"tmax": 20, "nx": 20, "ny": 30}, "SMALL": {"tmax": 40, "nx": 60, "ny": 80},
         "MEDIUM": {"tmax": 100, "nx": 200, "ny": 240}}


def kernels(dt: ir.DType = dtypes.float64) -> tuple[ir.Kernel, ir.Kernel]:
    """(ey and ex at step t, hz)."""
    k = ir.KernelBuilder("fdtd_2d_e")
    tmax, nx, ny = k.var("tmax", 1, 1 << 20), k.var("nx", 1, 1 << 14), k.var("ny", 1, 1 << 14)
    t = k.var("t", 0, tmax - 1)
    fict, hz = k.param("_fict_", dt, tmax), k.param("hz", dt, shape=(nx, ny))
    ex = k.param("ex", dt, shape=(nx, ny), writable=True)
    ey = k.param("ey", dt, shape=(nx, ny), writable=True)
    i, j = k.range(nx, "global"), k.range(ny, "global")
    ey[i, j] = ir.where(i.eq(0), fict[t], ey[i, j] - 0.5 * (hz[i, j] - hz.get((i - 1, j))))
    ex.store((i, j), ex[i, j] - 0.5 * (hz[i, j] - hz.get((i, j - 1))), gate=j > 0)
    ke = k.build()

    k = ir.KernelBuilder("fdtd_2d_h")
    nx, ny = k.var("nx", 2, 1 << 14), k.var("ny", 2, 1 << 14)
    ex, ey = k.param("ex", dt, shape=(nx, ny)), k.param("ey", dt, shape=(nx, ny))
    hz = k.param("hz", dt, shape=(nx, ny), writable=True)
    i, j = k.range(nx - 1, "global"), k.range(ny - 1, "global")
    hz[i, j] = hz[i, j] - 0.7 * (ex[i, j + 1] - ex[i, j] + ey[i + 1, j] - ey[i, j])
    return ke, k.build()


def init_arrays(tmax: int, nx: int, ny: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    i, j = np.arange(nx)[:, None], np.arange(ny)[None, :]
    return {"_fict_": np.arange(tmax, dtype=np.float64), "ex": i * (j + 1) / nx, "ey": i * (j + 2) / ny,
            "hz": i * (j + 3) / nx}


def reference(_fict_, ex, ey, hz, tmax: int) -> dict[str, np.ndarray]:
    ex, ey, hz = ex.copy(), ey.copy(), hz.copy()
    for t in range(tmax):
        ey[0, :] = _fict_[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return {"ex": ex, "ey": ey, "hz": hz}


def compute(device, arrs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    dev = as_device(device)
    ke, kh = (dev.compile(x) for x in kernels(data_type(arrs)))
    b = resident(dev, arrs)
    plan = dk.Plan(dev)
    for t in range(dims["tmax"]):
        plan.add(ke, _fict_=b["_fict_"], hz=b["hz"], ex=b["ex"], ey=b["ey"], t=t, **dims)
        plan.add(kh, ex=b["ex"], ey=b["ey"], hz=b["hz"], nx=dims["nx"], ny=dims["ny"])
    plan.run()
    return fetch(b, arrs, ("ex", "ey", "hz"))
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
