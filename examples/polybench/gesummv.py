"""PolyBench/C 4.2 gesummv: tmp = A x, y = alpha * tmp + beta * B x (A, B: n x n)."""

from __future__ import annotations

import sys

import devicekit as dk
import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

SIZES = {"MINI": {"n": 30}, "SMALL": {"n": 90}, "MEDIUM": {"n": 250}}
SCALARS = {"alpha": 1.5, "beta": 1.2}
ALPHA, BETA = SCALARS["alpha"], SCALARS["beta"]


def kernel() -> ir.Kernel:
    """One thread per row: both row sums share one loop over j (two accumulators)."""
    k = ir.KernelBuilder("gesummv")
    n = k.var("n", 1, 1 << 14)
    alpha, beta = k.scalar("alpha", dtypes.float64), k.scalar("beta", dtypes.float64)
    a, b = k.param("A", dtypes.float64, shape=(n, n)), k.param("B", dtypes.float64, shape=(n, n))
    x = k.param("x", dtypes.float64, n)
    tmp, y = k.param("tmp", dtypes.float64, n, writable=True), k.param("y", dtypes.float64, n, writable=True)
    i, j = k.range(n, "global"), k.range(n, "reduce")
    t = (a[i, j] * x[j]).sum(j)
    tmp[i] = t
    y[i] = alpha * t + beta * (b[i, j] * x[j]).sum(j)
    return k.build()


def init_arrays(n: int) -> dict[str, np.ndarray]:
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return {"A": ((i * j + 1) % n) / n, "B": ((i * j + 2) % n) / n, "x": (np.arange(n) % n) / n}


def reference(A: np.ndarray, B: np.ndarray, x: np.ndarray, alpha: float, beta: float) -> dict[str, np.ndarray]:
    tmp = A @ x
    return {"tmp": tmp, "y": alpha * tmp + beta * (B @ x)}


def compute(device, arrs: dict[str, np.ndarray], dims: dict[str, int], alpha: float = ALPHA,
            beta: float = BETA) -> dict[str, np.ndarray]:
    """The kernel on `device` for these arrays and sizes (what bench/polybench.py times)."""
    return dk.run(kernel(), device, **arrs, **dims, alpha=alpha, beta=beta)


def run(device=None, size: str = "MINI", alpha: float = ALPHA, beta: float = BETA) -> dict[str, np.ndarray]:
    """The kernel on `device` for PolyBench size `size`: the outputs by name."""
    return compute(device, init_arrays(**SIZES[size]), SIZES[size], alpha, beta)


if __name__ == "__main__":
    got = run()["y"]
    want = reference(**init_arrays(**SIZES["MINI"]), alpha=ALPHA, beta=BETA)["y"]
    err = float(np.max(np.abs(got - want)))
    print(f"gesummv MINI on {dk.device().spec}: max |error| {err:.2e}")
    sys.exit(0 if err < 1e-9 else 1)
