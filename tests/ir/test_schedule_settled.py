"""Reductions of a local array share one loop only while nothing can store to it before they are used
(ir/schedule.py `_settled`): the matmul's packed b tile feeds every accumulator from one k loop, and a reduction
over a local that a later statement stores again keeps its own loop, where it is used."""

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes


def _restored() -> ir.Kernel:
    k = ir.KernelBuilder("restored")
    x = k.param("x", dtypes.float32, 64)
    o = k.param("o", dtypes.float32, 2, writable=True)
    t = k.local("t", dtypes.float32, 64)
    i = k.range(64, "loop")
    t[i] = x[i]
    r = k.range(64, "reduce")
    o[0] = t[r].sum(r)
    j = k.range(64, "loop")
    t[j] = x[j] * 2.0  # stored again: the next reduction, over the same range, must read this
    o[1] = (t[r] + 0.5).sum(r)
    return k.build()


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_a_reduction_over_a_local_stored_again_is_not_read_early(device):
    if device == "CPU":
        pytest.importorskip("devicekit_cpu")
    x = np.arange(64, dtype=np.float32)
    out = dk.run(_restored(), device=device, x=x)["o"]
    np.testing.assert_array_equal(out, [x.sum(), 2 * x.sum() + 32])
