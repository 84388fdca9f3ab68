"""A global or local range with a start (`k.range(1, n - 1, "global")`): the lowering read the start as the end, so
the kernel ran lane 0 alone on every compiled device while the reference ran lanes 1..n-2 (a silent wrong result).
The builder now makes it `start + k.range(max(end - start, 0))`."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit.testing.devices import device_for


def _device(label):
    try:
        return device_for(label)
    except Exception as e:  # noqa: BLE001 - the kind is not installed or has no device here
        pytest.skip(f"{label}: {e}")


def interior():
    """The interior of an n x m grid, each lane reading its neighbours (a stencil's shape)."""
    k = ir.KernelBuilder("interior")
    n, m = k.var("n", 1, 1000), k.var("m", 1, 1000)
    x = k.param("x", dtypes.float32, shape=(n, m))
    o = k.param("o", dtypes.float32, shape=(n, m), writable=True)
    i, j = k.range(1, n - 1, "global"), k.range(2, m, "global")
    o[i, j] = x[i - 1, j] + x[i + 1, j] + x[i, j - 2]
    return k.build()


@pytest.mark.parametrize("label", ["PYTHON", "CPU/llvm", "CPU/c", "OPENCL"])
@pytest.mark.parametrize("n,m", [(5, 7), (2, 9), (1, 1), (40, 3)])
def test_lanes_start_where_the_range_says(label, n, m):
    dev = _device(label)
    x = np.arange(n * m, dtype=np.float32).reshape(n, m)
    got = dk.run(interior(), dev, x=x, o=np.full((n, m), -1, np.float32), n=n, m=m)["o"].reshape(n, m)
    want = np.full((n, m), -1, np.float32)
    want[1:n - 1, 2:] = x[:n - 2, 2:] + x[2:, 2:] + x[1:n - 1, :m - 2]
    np.testing.assert_array_equal(got, want)


def test_the_lane_range_is_zero_based():
    k = ir.KernelBuilder("g")
    n = k.var("n", 1, 100)
    i = k.range(3, n, "global")
    (r,) = [u for u in i.toposort() if u.op.name == "RANGE"]
    assert len(r.src) == 1 and r.arg[1] == "global"


def test_the_interior_is_proven_in_bounds():
    """The builder's `max(end - start, 0)` extent used to defeat the bounds proof, so every load of a stencil's
    interior was gated and checked at run time (jacobi-2d at MEDIUM: ~10x slower). The range's body runs only when
    `end - start >= 1`, where the max is `end - start`, and the proof now reads it so."""
    from devicekit.ir.linearize import lower
    caps = dk.device("CPU").renderer.capabilities
    assert lower(interior(), caps).checks is None
    k = ir.KernelBuilder("edge")
    n = k.var("n", 1, 100)
    x = k.param("x", dtypes.float32, shape=(n,))
    o = k.param("o", dtypes.float32, shape=(n,), writable=True)
    i = k.range(2, n, "global")
    o[i - 2] = x[i - 2] + x[i]
    assert lower(k.build(), caps).checks is None
    k = ir.KernelBuilder("past_the_end")  # one past the end is still refused, not assumed away
    n = k.var("n", 1, 100)
    x = k.param("x", dtypes.float32, shape=(n,))
    o = k.param("o", dtypes.float32, shape=(n,), writable=True)
    i = k.range(1, n, "global")
    with pytest.raises(ir.KernelError, match="out of bounds"):
        o[i - 1] = x[i + 1]
        k.build()
