"""The optimizer lifts a where epilogue (a mask, a relu written as a where) into the tile's vector: lane by lane, each
lane's copy of the value held its own copy of the sum, so a 16 x 16 tile ran 256 scalar reductions instead of 16
vector ones. Checked structurally (the reduce loops' accumulators are vectors) and against numpy on both CPU
pairs."""

from __future__ import annotations

import dataclasses
import itertools

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes, linearize

_names = itertools.count()


def masked_gemm(mask: bool) -> ir.Kernel:
    """out = where(m > 0, a @ b, 0) (a mask) or where(a @ b > 0, a @ b, 0) (relu as a where)."""
    k = ir.KernelBuilder(f"where_gemm_{next(_names)}")
    m, n, kk = k.var("m", 1, 4096), k.var("n", 1, 4096), k.var("k", 1, 4096)
    a, b = k.param("a", dtypes.float32, shape=(m, kk)), k.param("b", dtypes.float32, shape=(kk, n))
    mk = k.param("mask", dtypes.float32, shape=(m, n)) if mask else None
    out = k.param("out", dtypes.float32, shape=(m, n), writable=True)
    i, j, r = k.range(m, "global"), k.range(n, "global"), k.range(kk, "reduce")
    v = (a[i, r] * b[r, j]).sum(r)
    out[i, j] = ir.where(mk[i, j] > 0.0, v, 0.0) if mk is not None else ir.where(v > 0.0, v, 0.0)
    return k.build()


@pytest.mark.parametrize("mask", [True, False])
def test_a_where_epilogue_keeps_vector_accumulators(mask):
    caps = dataclasses.replace(dk.device("CPU").renderer.capabilities, vector_register_bytes=2048)
    lk = linearize.lower(masked_gemm(mask), caps)
    accs = [u for u in lk.uops if u.op is ir.Ops.DEFINE_ACC]
    scalar = [u for u in accs if u.dtype.count == 1]
    # the scalar tail's rows only: 16 rows x 1 lane (the main tile and the x8 tail: vectors)
    assert len(scalar) <= 16 and len(accs) - len(scalar) >= 16, (len(accs), len(scalar))


@pytest.mark.parametrize("pair", ["llvm", "c"])
@pytest.mark.parametrize("mask", [True, False])
def test_a_where_epilogue_matches_numpy(pair, mask):
    """A tile with row and column tails, one whole tile, a tail only: one program (the sizes are vars) runs them all
    (one compile per shape was 0.4-1.2 s each)."""
    dev = dk.device("CPU")
    prog = dev.compile(masked_gemm(mask), pair=pair)
    for M, N, K in [(37, 40, 30), (16, 16, 8), (3, 21, 5)]:
        rng = np.random.default_rng(M + N + K)
        a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
        mk = rng.standard_normal((M, N)).astype(np.float32)
        args = dict(a=a.ravel(), b=b.ravel(), out=np.full(M * N, np.nan, np.float32), m=M, n=N, k=K)
        v = a.astype(np.float64) @ b
        if mask:
            args["mask"] = mk.ravel()
            want = np.where(mk > 0, v, 0)
        else:
            want = np.where(v > 0, v, 0)
        got = dk.run(prog, dev, **args)["out"].reshape(M, N)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{pair} M, N, K = {M}, {N}, {K}")
