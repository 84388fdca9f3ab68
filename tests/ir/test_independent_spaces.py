"""Statements over unrelated global ranges (PolyBench bicg): on the CPU one split over the spaces' concatenation,
each space's loop clipped to the chunk; before, the second space ran whole in every chunk."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit.ir.linearize import lower
from devicekit.ir.ops import Ops
from devicekit.targets import Device


def bicg():
    k = ir.KernelBuilder("bicg")
    n, m = k.var("n", 1, 4096), k.var("m", 1, 4096)
    a = k.param("A", dtypes.float64, shape=(n, m))
    r, p = k.param("r", dtypes.float64, n), k.param("p", dtypes.float64, m)
    s, q = k.param("s", dtypes.float64, m, writable=True), k.param("q", dtypes.float64, n, writable=True)
    j, i = k.range(m, "global"), k.range(n, "reduce")
    s[j] = (r[i] * a[i, j]).sum(i)
    i2, j2 = k.range(n, "global"), k.range(m, "reduce")
    q[i2] = (a[i2, j2] * p[j2]).sum(j2)
    return k.build()


@pytest.mark.parametrize("device", ["PYTHON", "CPU/llvm", "CPU/c"])
@pytest.mark.parametrize("n,m", [(1, 1), (3, 700), (700, 5), (300, 301)])
def test_bicg_matches_numpy(device, n, m):
    kind, _, pair = device.partition("/")
    dev = dk.device(kind)
    if pair:
        rr, cc = dev.pair(pair)
        dev = Device(dev.spec, dev.allocator, rr, cc, dev.runtime)
    rng = np.random.default_rng(n * m)
    a, r, p = rng.standard_normal((n, m)), rng.standard_normal(n), rng.standard_normal(m)
    out = dk.run(bicg(), dev, A=a, r=r, p=p, n=n, m=m)
    np.testing.assert_allclose(out["s"], r @ a, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(out["q"], a @ p, rtol=1e-10, atol=1e-10)


def test_the_split_covers_both_spaces_and_no_loop_is_nested():
    lk = lower(bicg(), dk.device("CPU").renderer.capabilities)
    assert lk.core_split is not None and lk.core_split.op is Ops.ADD  # n + m
    depth, outer = 0, []
    for u in lk.uops:
        if u.op is Ops.RANGE:
            if depth == 0:
                outer.append(u)
            depth += 1
        elif u.op is Ops.ENDRANGE:
            depth -= 1
    assert len(outer) == 2 and all(len(r.src) == 2 for r in outer)
