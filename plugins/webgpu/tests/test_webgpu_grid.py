"""WEBGPU grids over max-compute-workgroups-per-dimension (65535): a 1-D launch of 16M elements asks for 65,536
workgroups of 256. The runtime folds such grids into 2-D dispatches and the shader recomputes the group id
(runtime.fold, renderer FOLD_PRELUDE); these tests hold the results to numpy at and past the fold, with the extra
groups masked (a prime size), a group id in index arithmetic with a var, a 2-D grid, and the bounds checks."""

from __future__ import annotations

import numpy as np
import pytest
from devicekit import ir, kernels, settings
from devicekit.errors import LaunchError
from devicekit.ir import dtypes

BIG = 16 * 2**20  # 65,536 groups of 256: one past the per-dimension limit
PRIME = 65537 * 256 + 3  # a last, partial group, and nx * ny - total extra groups the shader masks


def test_fold_words():
    from devicekit_webgpu.runtime import FOLD_TOTAL, fold
    assert fold((100, 3), 65535) == ((100, 3, 1), (0, 0, 0, 0, 0, 0))  # within the limit: as dispatched
    assert fold((65536,), 65535) == ((65535, 2, 1), (1, 65535, 2, 65536, 1, 65536))
    assert fold((70000, 3), 65535) == ((65535, 4, 1), (1, 65535, 4, 70000, 3, 210000))
    assert fold((FOLD_TOTAL,), 65535)[0] == (65535, 32769, 1)
    assert fold((200, 10, 10), 100) == ((100, 100, 2), (1, 100, 100, 200, 10, 20000))  # a small limit: 3 axes
    with pytest.raises(LaunchError, match="max-compute-workgroups-per-dimension"):
        fold((FOLD_TOTAL + 1,), 65535)
    with pytest.raises(LaunchError, match="at most 100 groups an axis"):
        fold((1000, 1000, 2), 100)
    with pytest.raises(LaunchError, match="global id in 32 bits"):  # the group id fits, the global id does not
        fold((2**24,), 65535, (256,))
    assert fold((2**23 - 1,), 65535, (256,))[0] == (65535, 129, 1)


@pytest.mark.parametrize("n", [pytest.param(BIG, marks=pytest.mark.skipif(
    not settings.get("DEVICEKIT_SLOW"), reason="DEVICEKIT_SLOW=1: the 16M case too (the prime size covers the fold)")),
    PRIME])
def test_elementwise_past_the_per_dimension_limit(wg_device, n):
    import devicekit as dk
    a, b, c = (np.random.default_rng(i).standard_normal(n).astype(np.float32) for i in range(3))
    out = dk.run(kernels.elementwise("a * b + c"), device="WEBGPU", a=a, b=b, c=c, n=n)["out"]
    np.testing.assert_array_equal(out, a * b + c)


def test_gather_past_the_per_dimension_limit(wg_device):
    """The bench's gather (int64 indices, checked) at 16M; an index out of range in the last group still fails."""
    import devicekit as dk
    from devicekit.bench.definition import gather_kernel
    x = np.random.default_rng(1).standard_normal(BIG).astype(np.float32)
    idx = np.random.default_rng(2).integers(0, BIG, BIG)
    out = dk.run(gather_kernel(True), device="WEBGPU", x=x, idx=idx, n=BIG, m=BIG)["out"]
    np.testing.assert_array_equal(out, x[idx])
    idx[-1] = BIG
    with pytest.raises(IndexError):
        dk.run(gather_kernel(True), device="WEBGPU", x=x, idx=idx, n=BIG, m=BIG)


def _offset_kernel() -> ir.Kernel:
    """out[i + off] = x[(3 * i + off) % m] * (i % 7): the group id in index arithmetic with a var (both indices
    bounds-proven through the vars' ranges) and in the value."""
    k = ir.KernelBuilder("fold_offset")
    n, m, off = k.var("n", 1, 2**30), k.var("m", 1, 2**30), k.var("off", 0, 2**20)
    x = k.param("x", dtypes.float32, m)
    out = k.param("out", dtypes.float32, n + off, writable=True)
    i = k.range(n, "global")
    out[i + off] = x[(i * 3 + off) % m] * (i % 7).cast(dtypes.float32)
    return k.build()


def test_group_id_with_a_var_on_a_prime_grid(wg_device):
    import devicekit as dk
    off, m = 5, 1000003
    x = np.random.default_rng(3).standard_normal(m).astype(np.float32)
    out = dk.run(_offset_kernel(), device="WEBGPU", x=x, n=PRIME, m=m, off=off)["out"]
    i = np.arange(PRIME)
    np.testing.assert_array_equal(out[off:], x[(3 * i + off) % m] * (i % 7).astype(np.float32))


def test_two_axis_grid_folds(wg_device):
    """A 2-D grid whose first axis is over the limit: the flat id unflattens into both axes."""
    import devicekit as dk
    k = ir.KernelBuilder("fold_2d")
    n = k.var("n", 1)
    out = k.param("out", dtypes.int32, 3 * n, writable=True)
    r, c = k.range(3, "global"), k.range(n, "global")
    out[r * n + c] = (c * 4 + r).cast(dtypes.int32)
    n_ = 65536 * 64 + 1
    got = dk.run(k.build(), device="WEBGPU", n=n_)["out"]
    rr, cc = np.divmod(np.arange(3 * n_), n_)
    np.testing.assert_array_equal(got, (cc * 4 + rr).astype(np.int32))


def test_grid_past_the_fold_is_a_launch_error(wg_device):
    import devicekit as dk
    p = wg_device.compile(kernels.elementwise("a * b + c"))
    bufs = [dk.Buffer(wg_device, 4, dtypes.float32) for _ in range(4)]
    with pytest.raises(LaunchError, match="max-compute-workgroups-per-dimension"):
        p.execute(bufs, [4], global_size=(2**31,), local_size=(256,))


def test_folded_grid_with_workgroup_memory_and_a_barrier(wg_device):
    """The masked groups return before a workgroupBarrier: naga must still see it in uniform control flow, and
    each group's tile its own (70,001 groups of 16: folded to 65,535 x 2)."""
    import devicekit as dk
    k = ir.KernelBuilder("fold_tile")
    n = k.var("n", 1, 2**20)
    a = k.param("a", dtypes.float32, n * 16)
    out = k.param("out", dtypes.float32, n * 16, writable=True)
    g, t = k.range(n, "global"), k.range(16, "local")
    tile = k.local("tile", dtypes.float32, 16)
    tile[t] = a[g * 16 + t]
    k.barrier()
    out[g * 16 + t] = tile[15 - t] + g.cast(dtypes.float32)
    n_ = 70001
    x = np.random.default_rng(5).standard_normal(n_ * 16).astype(np.float32)
    got = dk.run(k.build(), device="WEBGPU", a=x, n=n_)["out"]
    want = x.reshape(n_, 16)[:, ::-1] + np.arange(n_, dtype=np.float32)[:, None]
    np.testing.assert_array_equal(got, want.reshape(-1))
