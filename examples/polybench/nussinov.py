"""PolyBench/C 4.2 nussinov: the RNA folding dynamic program (seq: n bases, table: n x n, int).

table[i][j] needs table[i][k] (the same row, k < j) and table[k+1][j] (rows below): i runs from n-2 down to 0 and
j up from i+1, one lane, in `loop` ranges that see earlier iterations' stores; PolyBench's successive max updates
are one max of the candidates, with a max-reduction over the split point k."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

from ._common import launch, main, sized

SIZES = {"MINI": {"n": 60}, "SMALL": {"n": 180}, "MEDIUM": {"n": 500}}


def kernel(seq_dt: ir.DType = dtypes.int8) -> ir.Kernel:
    """seq_dt: PolyBench's `base` (char); int32 in the narrow build, for targets without 8-bit data (WGSL)."""
    k = ir.KernelBuilder("nussinov")
    n = k.var("n", 1, 1 << 14)
    seq = k.param("seq", seq_dt, n)
    t = k.param("table", dtypes.int32, shape=(n, n), writable=True)
    i = n - 2 - k.range(n - 1, "loop")  # row n-1 has no j > i
    j = k.range(i + 1, n, "loop")
    kk = k.range(i + 1, j, "reduce")
    match = ir.where((seq[i] + seq[j]).eq(3), 1, 0)
    v = ir.maximum(ir.maximum(t[i, j], t[i, j - 1]), t[i + 1, j])
    v = ir.maximum(v, t[i + 1, j - 1] + ir.where(i < j - 1, match, 0))
    t[i, j] = ir.maximum(v, (t[i, kk] + t[kk + 1, j]).max(kk))
    return k.build()


def init_arrays(n: int) -> dict[str, np.ndarray]:
    """PolyBench's init_array."""
    return {"seq": ((np.arange(n) + 1) % 4).astype(np.int8), "table": np.zeros((n, n), np.int32)}


def reference(seq, table) -> dict[str, np.ndarray]:
    """PolyBench's loops, the split point k vectorized."""
    t, n = table.copy(), len(seq)
    s = seq.astype(np.int32)
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            v = max(t[i, j], t[i, j - 1], t[i + 1, j])
            v = max(v, t[i + 1, j - 1] + (int(s[i] + s[j] == 3) if i < j - 1 else 0))
            if j > i + 1:
                v = max(v, int((t[i, i + 1:j] + t[i + 2:j + 1, j]).max()))
            t[i, j] = v
    return {"table": t}


compute = launch(__name__)  # dk.run of kernel() (what bench/polybench.py times)
run = sized(__name__)  # compute on PolyBench's init_arrays at SIZES[size]


if __name__ == "__main__":
    main(__import__(__name__))
