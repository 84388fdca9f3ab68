"""PolyBench/C 4.2 deriche: Deriche's recursive edge detector, a causal and an anticausal second-order IIR filter
along rows, then along columns (imgIn, imgOut, y1, y2: w x h; PolyBench's DATA_TYPE here is float).

PolyBench's filter state (xm1, ym1, ym2, ...) is the previous elements of the row or column, which y1, y2 and the
input hold: each recurrence loads them back through `get` (0 before the first element), in a `loop` range. Two
launches: one lane per row, then one lane per column. alpha is a float32 scalar; the coefficients are computed
from it in the kernel, as PolyBench computes them."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import as_device, fetch, main, resident, sized

SIZES = {"MINI": {"w": 64, "h": 64}, "SMALL": {"w": 192, "h": 128}, "MEDIUM": {"w": 720, "h": 480}}
SCALARS = {"alpha": 0.25}
TOL = 1e-4
F32 = dtypes.float32


def coefficients(alpha, exp, exp2):
    """(a1..a4, b1, b2) from alpha, with the exp functions given (the kernel's or numpy's); a5..a8 = a1..a4."""
    e = exp(-alpha)
    kk = (1.0 - e) * (1.0 - e) / (1.0 + 2.0 * alpha * e - exp(2.0 * alpha))
    return kk, kk * e * (alpha - 1.0), kk * e * (alpha + 1.0), -kk * exp(-2.0 * alpha), exp2(-alpha), -exp(-2.0 * alpha)


def _filter(k: ir.KernelBuilder, src, y1, y2, out, lane, n, along_rows: bool):
    """The causal filter into y1, the anticausal one into y2, out = y1 + y2 (c1 = c2 = 1), along one line."""
    alpha = k.scalar("alpha", F32)
    a1, a2, a3, a4, b1, b2 = coefficients(alpha, ir.exp, ir.exp2)
    at = (lambda t: (lane, t)) if along_rows else (lambda t: (t, lane))
    t = k.range(n, "loop")
    y1[at(t)] = a1 * src[at(t)] + a2 * src.get(at(t - 1)) + b1 * y1.get(at(t - 1)) + b2 * y1.get(at(t - 2))
    t = n - 1 - k.range(n, "loop")
    y2[at(t)] = a3 * src.get(at(t + 1)) + a4 * src.get(at(t + 2)) + b1 * y2.get(at(t + 1)) + b2 * y2.get(at(t + 2))
    t = k.range(n, "loop")
    out[at(t)] = y1[at(t)] + y2[at(t)]


def kernels() -> tuple[ir.Kernel, ir.Kernel]:
    """(the horizontal pass: imgIn -> imgOut, one lane per row; the vertical pass: imgOut in place, per column)."""
    out = []
    for along_rows in (True, False):
        k = ir.KernelBuilder("deriche_rows" if along_rows else "deriche_cols")
        w, h = k.var("w", 1, 1 << 14), k.var("h", 1, 1 << 14)
        img_in = k.param("imgIn", F32, shape=(w, h)) if along_rows else None
        img_out = k.param("imgOut", F32, shape=(w, h), writable=True)
        y1, y2 = k.param("y1", F32, shape=(w, h), writable=True), k.param("y2", F32, shape=(w, h), writable=True)
        lane = k.range(w if along_rows else h, "global")
        _filter(k, img_in if along_rows else img_out, y1, y2, img_out, lane, h if along_rows else w, along_rows)
        out.append(k.build())
    return out[0], out[1]


def init_arrays(w: int, h: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    i, j = np.arange(w)[:, None], np.arange(h)[None, :]
    z = np.zeros((w, h), np.float32)
    return {"imgIn": (((313 * i + 991 * j) % 65536) / 65535.0).astype(np.float32), "imgOut": z, "y1": z.copy(),
            "y2": z.copy()}


def reference(imgIn, imgOut, y1, y2, alpha: float) -> dict[str, np.ndarray]:
    """PolyBench's loops in float32, vectorized over the lines."""
    f = np.float32
    a1, a2, a3, a4, b1, b2 = (f(c) for c in coefficients(f(alpha), np.exp, np.exp2))
    w, h = imgIn.shape
    y1, y2 = np.zeros((w, h), f), np.zeros((w, h), f)

    def line(x, y1, y2):  # x: (lines, n); the filters along axis 1
        n = x.shape[1]
        z = np.zeros(x.shape[0], f)
        at = lambda a, t: a[:, t] if 0 <= t < n else z
        for t in range(n):
            y1[:, t] = a1 * x[:, t] + a2 * at(x, t - 1) + b1 * at(y1, t - 1) + b2 * at(y1, t - 2)
        for t in range(n - 1, -1, -1):
            y2[:, t] = a3 * at(x, t + 1) + a4 * at(x, t + 2) + b1 * at(y2, t + 1) + b2 * at(y2, t + 2)
        return y1 + y2
    out = line(imgIn, y1, y2)
    y1c, y2c = np.zeros((h, w), f), np.zeros((h, w), f)
    out = line(np.ascontiguousarray(out.T), y1c, y2c).T
    return {"imgOut": out, "y1": y1c.T, "y2": y2c.T}


def compute(device, arrs: dict[str, np.ndarray], dims: dict[str, int], alpha: float = SCALARS["alpha"]):
    dev = as_device(device)
    kr, kc = (dev.compile(x) for x in kernels())
    b = resident(dev, arrs)
    kr(imgIn=b["imgIn"], imgOut=b["imgOut"], y1=b["y1"], y2=b["y2"], alpha=alpha, **dims)
    kc(imgOut=b["imgOut"], y1=b["y1"], y2=b["y2"], alpha=alpha, **dims)
    return fetch(b, arrs, ("imgOut", "y1", "y2"))
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
