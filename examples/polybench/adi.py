"""PolyBench/C 4.2 adi: alternating direction implicit solver of 2D heat diffusion (u, v, p, q: n x n).

Per time step a column sweep (u -> v) and a row sweep (v -> u), each one lane per line i (a global range of n - 2
lanes starting at 1) solving a tridiagonal system: p and q by a forward recurrence, then the line back to front, both
`loop` ranges reading what earlier iterations stored. The time loop is a dk.Plan of 2 * tsteps launches; the
coefficients come from n and tsteps inside the kernels, as PolyBench computes them."""

from __future__ import annotations

import devicekit as dk
import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import as_device, data_type, fetch, main, resident, sized

SIZES = {"MINI": {"tsteps": 20, "n": 20}, "SMALL": {"tsteps": 40, "n": 60}, "MEDIUM": {"tsteps": 100, "n": 200}}
TOL = 1e-10


def coefficients(n, tsteps):
    """PolyBench's a..f from the sizes (as floats: kernel values or Python floats)."""
    dx = dy = 1.0 / n
    dt = 1.0 / tsteps
    mul1, mul2 = 2.0 * dt / (dx * dx), 1.0 * dt / (dy * dy)
    a, d = -mul1 / 2.0, -mul2 / 2.0
    return a, 1.0 + mul1, a, d, 1.0 + mul2, d


def kernels(dt: ir.DType = dtypes.float64) -> tuple[ir.Kernel, ir.Kernel]:
    """(the column sweep, the row sweep)."""
    out = []
    for col in (True, False):
        k = ir.KernelBuilder("adi_col" if col else "adi_row")
        tsteps, n = k.var("tsteps", 1, 1 << 20), k.var("n", 3, 1 << 14)
        src = k.param("u" if col else "v", dt, shape=(n, n))
        dst = k.param("v" if col else "u", dt, shape=(n, n), writable=True)
        p = k.param("p", dt, shape=(n, n), writable=True)
        q = k.param("q", dt, shape=(n, n), writable=True)
        a, b, c, d, e, f = coefficients(n.cast(dt), tsteps.cast(dt))
        if not col:  # the row sweep is the column sweep with the roles of (a, b, c) and (d, e, f) swapped
            a, b, c, d, e, f = d, e, f, a, b, c
        at = (lambda i, j: (j, i)) if col else (lambda i, j: (i, j))  # the column sweep writes v[j][i]
        i = k.range(1, n - 1, "global")
        dst[at(i, 0)] = 1.0
        p[i, 0] = 0.0
        q[i, 0] = 1.0
        j = 1 + k.range(n - 2, "loop")
        den = a * p[i, j - 1] + b
        p[i, j] = -c / den
        q[i, j] = (-d * src[at(i - 1, j)] + (1.0 + 2.0 * d) * src[at(i, j)] - f * src[at(i + 1, j)]
                   - a * q[i, j - 1]) / den
        dst[at(i, n - 1)] = 1.0
        j = n - 2 - k.range(n - 2, "loop")
        dst[at(i, j)] = p[i, j] * dst[at(i, j + 1)] + q[i, j]
        out.append(k.build())
    return out[0], out[1]


def init_arrays(n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array (u; v, p and q start at 0)."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    z = np.zeros((n, n))
    return {"u": (i + n - j) / n, "v": z, "p": z.copy(), "q": z.copy()}


def reference(u, v, p, q, tsteps: int) -> dict[str, np.ndarray]:
    """PolyBench's loops, vectorized over the lines i."""
    n = len(u)
    u, v, p, q = u.copy(), v.copy(), p.copy(), q.copy()
    a, b, c, d, e, f = coefficients(float(n), float(tsteps))
    r = slice(1, n - 1)
    for _ in range(tsteps):
        v[0, r], p[r, 0], q[r, 0] = 1.0, 0.0, 1.0
        for j in range(1, n - 1):
            den = a * p[r, j - 1] + b
            p[r, j] = -c / den
            q[r, j] = (-d * u[j, 0:n - 2] + (1.0 + 2.0 * d) * u[j, r] - f * u[j, 2:n] - a * q[r, j - 1]) / den
        v[n - 1, r] = 1.0
        for j in range(n - 2, 0, -1):
            v[j, r] = p[r, j] * v[j + 1, r] + q[r, j]
        u[r, 0], p[r, 0], q[r, 0] = 1.0, 0.0, 1.0
        for j in range(1, n - 1):
            den = d * p[r, j - 1] + e
            p[r, j] = -f / den
            q[r, j] = (-a * v[0:n - 2, j] + (1.0 + 2.0 * a) * v[r, j] - c * v[2:n, j] - d * q[r, j - 1]) / den
        u[r, n - 1] = 1.0
        for j in range(n - 2, 0, -1):
            u[r, j] = p[r, j] * u[r, j + 1] + q[r, j]
    return {"u": u, "v": v, "p": p, "q": q}


def compute(device, arrs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    dev = as_device(device)
    kc, kr = (dev.compile(x) for x in kernels(data_type(arrs)))
    b = resident(dev, arrs)
    plan = dk.Plan(dev)
    for _ in range(dims["tsteps"]):
        plan.add(kc, u=b["u"], v=b["v"], p=b["p"], q=b["q"], **dims)
        plan.add(kr, v=b["v"], u=b["u"], p=b["p"], q=b["q"], **dims)
    plan.run()
    return fetch(b, arrs, ("u", "v", "p", "q"))
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
