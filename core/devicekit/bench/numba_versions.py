"""The numba column of the benchmarks: each standard case written as a parallel numba `@njit` (`prange` over the
outer loop: what a Python user would write for a CPU kernel instead of devicekit), at its fastest configuration
(`fastmath=True` for the reductions, softmax and matmul: without it LLVM may not reorder a float sum, so the
reduction runs one lane at a time), run on the same inputs in the same process. Optional: without numba, `unavailable()` says why and the column is absent. Compiled on first use (the
warm-up call); numba's own disk cache is off, so nothing is written next to the sources."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np


def unavailable() -> str | None:
    """None when numba imports here, else the reason in words."""
    try:
        import numba  # noqa: F401
    except ImportError as e:
        return f"numba is not installed ({e.name}): pip install numba (it is in devicekit[bench])"
    except Exception as e:  # noqa: BLE001 - a numba/llvmlite mismatch is "unavailable", not a crash
        return f"numba does not import: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return None


@functools.cache
def _kernels() -> dict[str, Callable[..., Any]]:
    from numba import njit, prange

    @njit(parallel=True, cache=False)
    def fma(a, b, c, out):  # into a preallocated output, as devicekit writes into a resident Buffer: a fresh 64 MB
        for i in prange(a.size):  # array per call costs its page faults (4x the kernel's time at 16M)
            out[i] = a[i] * b[i] + c[i]
        return out

    @njit(parallel=True, fastmath=True, cache=False)
    def total(x):
        t = np.float32(0.0)
        for i in prange(x.size):
            t += x[i]
        return t

    @njit(parallel=True, fastmath=True, cache=False)
    def softmax(x, rows, cols):
        out = np.empty_like(x)
        for r in prange(rows):
            row = x[r * cols:(r + 1) * cols]
            m = row.max()
            e = np.exp(row - m)
            out[r * cols:(r + 1) * cols] = e / e.sum()
        return out

    @njit(parallel=True, fastmath=True, cache=False)
    def matmul(a, b, s):
        c = np.zeros(s * s, dtype=a.dtype)
        for i in prange(s):
            for k in range(s):
                aik = a[i * s + k]
                for j in range(s):
                    c[i * s + j] += aik * b[k * s + j]
        return c

    @njit(parallel=True, cache=False)
    def gather(x, idx):
        out = np.empty(idx.size, dtype=x.dtype)
        for i in prange(idx.size):
            out[i] = x[idx[i]]
        return out

    w = np.float32(0.2)  # a float32 constant: numba's 0.2 is a float64 and would widen the whole sum

    @njit(parallel=True, fastmath=True, cache=False)
    def mlp(x, w1, b1, w2, b2):  # x (m, k), w1 (k, h), w2 (h, o): a row of x per prange step, i-k-j loops
        m, k, h, o = x.shape[0], w1.shape[0], w1.shape[1], w2.shape[1]
        hid = np.empty((m, h), dtype=x.dtype)
        out = np.empty((m, o), dtype=x.dtype)
        for i in prange(m):
            hid[i] = b1
            for r in range(k):
                xv = x[i, r]
                for j in range(h):
                    hid[i, j] += xv * w1[r, j]
            for j in range(h):
                hid[i, j] = max(hid[i, j], np.float32(0.0))
            out[i] = b2
            for j in range(h):
                hv = hid[i, j]
                for c in range(o):
                    out[i, c] += hv * w2[j, c]
        return out

    @njit(parallel=True, fastmath=True, cache=False)
    def jacobi(a, out):  # the interior into a preallocated out (its border a's, copied once)
        n, m = a.shape
        for i in prange(1, n - 1):
            for j in range(1, m - 1):
                out[i, j] = (a[i, j] + a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1]) * w
        return out

    return {"fma": fma, "sum": total, "softmax": softmax, "matmul": matmul, "gather": gather, "mlp": mlp,
            "jacobi": jacobi}


CONFIG = {"fma": "parallel", "sum": "parallel, fastmath", "softmax": "parallel, fastmath",
          "matmul": "parallel, fastmath", "gather": "parallel", "mlp": "parallel, fastmath",
          "jacobi": "parallel, fastmath"}  # the @njit options of each case (the header says)


def version_for(case_name: str) -> Callable[[dict[str, Any]], Any] | None:
    """A function of the case's inputs (the dict dk.run takes) running the numba version, or None when the case has
    none (or numba is unavailable)."""
    if unavailable() is not None:
        return None
    k = _kernels()
    if case_name == "fma":
        held: list = []  # (a, out): one output per input array, allocated (and paged in) by the warm-up call

        def fma(d):
            if not held or held[0][0] is not d["a"]:
                held[:] = [(d["a"], np.empty_like(d["a"]))]
            return k["fma"](d["a"], d["b"], d["c"], held[0][1])
        return fma
    if case_name == "sum":
        return lambda d: k["sum"](d["x"])
    if case_name == "softmax":
        return lambda d: k["softmax"](d["x"], d["m"], d["n"])
    if case_name in ("matmul", "matmul-default", "matmul-naive"):  # numba's naive loops: the peer of the naive kernel too
        return lambda d: k["matmul"](d["a"], d["b"], int(d["a"].size ** 0.5 + 0.5))
    if case_name in ("gather", "gather-unchecked"):
        return lambda d: k["gather"](d["x"], d["idx"])
    if case_name == "mlp":
        return lambda d: k["mlp"](*_mlp_arrays(d))
    if case_name == "jacobi":
        outs: list = []  # (a, out): out a copy of a made once (its border), as the case defines it

        def jacobi(d):
            if not outs or outs[0][0] is not d["a"]:
                outs[:] = [(d["a"], d["a"].copy())]
            return k["jacobi"](d["a"], outs[0][1])
        return jacobi
    return None


def _mlp_arrays(d: dict[str, Any]) -> tuple[np.ndarray, ...]:
    """(x, w1, b1, w2, b2) of the MLP case, the flat arrays viewed as matrices (no copy)."""
    from .more_cases import MLP_DIMS
    k, h, o = MLP_DIMS
    return d["x"].reshape(-1, k), d["w1"].reshape(k, h), d["b1"], d["w2"].reshape(h, o), d["b2"]


def first_call_seconds(salt: float) -> float | None:
    """Seconds of the first call of a never-seen parallel `a*b+c` njit (its compile included): the numba side of the
    bench's new-kernel row. `salt`, a constant of the function, makes each one new. None without numba."""
    if unavailable() is not None:
        return None
    import time

    from numba import njit, prange

    def fma_salted(a, b, c, out):
        for i in prange(a.size):
            out[i] = a[i] * b[i] + c[i] * salt
    x = np.ones(64, np.float32)
    t0 = time.perf_counter()
    njit(parallel=True, cache=False)(fma_salted)(x, x, x, np.empty_like(x))
    return time.perf_counter() - t0
