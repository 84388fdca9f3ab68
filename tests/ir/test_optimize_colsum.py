"""A kernel whose one global range is the vector axis (a column sum, `out[j] = sum_i g[i, j]`): the optimizer upcasts
the range the CPU splits across threads; its vector loop and tails are independent iteration spaces, so each column
is computed once, by one chunk, at every width and thread count (the tails ran in every chunk before the split
knew them apart)."""

from __future__ import annotations

import itertools

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes

_names = itertools.count()


def column_sum(dt=dtypes.float32) -> ir.Kernel:
    k = ir.KernelBuilder(f"colsum_{next(_names)}")
    m, n = k.var("m", 1, 4096), k.var("n", 1, 4096)
    g, out = k.param("g", dt, shape=(m, n)), k.param("out", dt, size=n, writable=True)
    j, r = k.range(n, "global"), k.range(m, "reduce")
    out[j] = g[r, j].sum(r)
    return k.build()


@pytest.mark.parametrize("pair", ["llvm", "c"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_column_sum_is_upcast_and_right_at_every_width(pair, threads, monkeypatch):
    monkeypatch.setenv("DEVICEKIT_CPU_THREADS", str(threads))
    dev = dk.device("CPU")
    prog = dev.compile(column_sum(), pair=pair)
    assert prog.spec.get_meta("opts")[0] == "upcast global range 0 x16", prog.spec.get_meta("opts")
    rng = np.random.default_rng(threads)
    for m, n in [(3, 1), (5, 7), (4, 8), (9, 15), (2, 16), (7, 17), (3, 24), (6, 25), (4, 33), (11, 100), (3, 517)]:
        g = rng.standard_normal((m, n)).astype(np.float32)
        got = dk.run(prog, dev, g=g.ravel(), out=np.full(n, np.nan, np.float32), m=m, n=n)["out"]
        np.testing.assert_allclose(got, g.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)


def test_a_row_walk_of_the_one_range_is_not_upcast():
    """out[i] = sum_r a[i, r]: the one global range has no unit stride in a's loads: nothing to upcast."""
    k = ir.KernelBuilder(f"rowsum_{next(_names)}")
    m, n = k.var("m", 1, 4096), k.var("n", 1, 4096)
    a, out = k.param("a", dtypes.float32, shape=(m, n)), k.param("out", dtypes.float32, size=m, writable=True)
    i, r = k.range(m, "global"), k.range(n, "reduce")
    out[i] = a[i, r].sum(r)
    assert not dk.device("CPU").compile(k.build()).spec.get_meta("opts")
