"""Gathers through int32 and uint32 index buffers on WEBGPU. Before, every such kernel was refused at render ("define_acc
of dtype int64 may take values in [-2147483648, 2147483647], outside int32"): the bounds-check record may hold the
index, and int32's minimum is the record sentinel's image (uint32 past 2**31 - 1 does not fit at all), so a fitted
fuzz campaign (`fuzz --fit`, no int64 data) refused all its gathers (94 of 5,000 kernels, seeds 95000..99999). Now
such a widened value is checked at run time as an int64 load is (ir.narrow.checked_cast; dk_fit_i, dk_fit_u): in
int32 it gathers as everywhere; outside, the saturated index fails the bounds check (the reference's IndexError)
or, where no check fails, the launch raises a DataRangeError naming it."""

from __future__ import annotations

import numpy as np
import pytest
from devicekit import ir
from devicekit.errors import DataRangeError
from devicekit.ir.accept import as_kernel
from devicekit.ir.dtypes import dtypes
from devicekit.ir.linearize import lower
from devicekit.ir.narrow import narrow_plan
from devicekit.ir.uop import KernelError
from devicekit_webgpu.renderer import WGSLRenderer

IDX = (dtypes.int32, dtypes.uint32, dtypes.int64)


def gather(idx_dt, reduce: int = 0) -> ir.Kernel:
    """out[i] = src[idx[i]] (or summed over `reduce` indices per lane), with the run-time bounds check."""
    k = ir.KernelBuilder(f"g_{idx_dt.name}_{reduce}")
    n, m = k.var("n", 1, 4096), k.var("m", 1, 4096)
    src = k.param("src", dtypes.float32, m)
    idx = k.param("idx", idx_dt, n * reduce if reduce else n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    if reduce:
        r = k.range(reduce, "reduce")
        out[i] = src[idx[i * reduce + r]].sum(r)
    else:
        out[i] = src[idx[i]]
    return k.build()


@pytest.mark.parametrize("idx_dt", [dtypes.int32, dtypes.uint32])
def test_narrowing_checks_a_widened_32_bit_index(idx_dt):
    """No device: the backend that checks its loads (loads=True) narrows the gather; without the check it is still
    refused by name (what the CUDA/OpenCL narrowing, which has no run-time check, keeps)."""
    lk = lower(as_kernel(gather(idx_dt), "test"), WGSLRenderer().capabilities)
    assert narrow_plan(lk, "T", loads=True) == ()
    with pytest.raises(KernelError, match="does not support 64-bit integer values"):
        narrow_plan(lk, "T")


def test_arithmetic_on_a_widened_index_is_still_proven():
    """idx * 4 of a checked uint32 index may reach 4 * (2**31 - 1): refused by name, as before."""
    k = ir.KernelBuilder("g4")
    n = k.var("n", 1, 4096)
    src, idx = k.param("src", dtypes.float32, n * 4), k.param("idx", dtypes.uint32, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = src[idx[i].cast(dtypes.int64) * 4]
    with pytest.raises(KernelError, match="does not support 64-bit integer values"):
        narrow_plan(lower(as_kernel(k.build(), "test"), WGSLRenderer().capabilities), "T", loads=True)


@pytest.mark.parametrize("reduce", [0, 3])
@pytest.mark.parametrize("idx_dt", IDX)
def test_gathers_match_the_reference(wg_device, idx_dt, reduce):
    import devicekit as dk
    x = np.arange(8, dtype=np.float32) * 1.5
    ids = np.array([3, 1, 7, 0, 5, 2][:6 if reduce else 3], idx_dt.np)
    kern = gather(idx_dt, reduce)
    want = dk.run(kern, "PYTHON", src=x, idx=ids, n=2 if reduce else 3, m=8)["out"]
    got = dk.run(kern, wg_device, src=x, idx=ids, n=2 if reduce else 3, m=8)["out"]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("idx_dt", "bad"), [(dtypes.int32, -(2**31)), (dtypes.uint32, 2**32 - 1),
                                             (dtypes.uint32, 2**31), (dtypes.int32, 8), (dtypes.int32, -1)])
def test_an_index_out_of_bounds_raises_the_references_error(wg_device, idx_dt, bad):
    """Outside int32 too: the saturated index fails the bounds check on the same param (the index it reports is
    the saturated one)."""
    import devicekit as dk
    ids = np.array([3, bad, 7], idx_dt.np)
    for dev in ("PYTHON", wg_device):
        with pytest.raises(IndexError, match=r"kernel g_\w+: access to src\["):
            dk.run(gather(idx_dt), dev, src=np.zeros(8, np.float32), idx=ids, n=3, m=8)


@pytest.mark.parametrize(("dt", "fits", "bad"), [(dtypes.uint32, 2**31 - 1, 2**31), (dtypes.int32, -(2**31) + 1, -(2**31))])
def test_a_widened_value_outside_int32_fails_the_launch(wg_device, dt, fits, bad):
    """Not an index: a uint32 past 2**31 - 1, or int32's minimum (the sentinel's image: it would be stored back as
    INT64_MIN), widened into an int64 buffer beside a gather (so the kernel has the sentinel) cannot be computed in
    32 bits: a DataRangeError naming it, not a wrong value."""
    import devicekit as dk
    k = ir.KernelBuilder("widen")
    n = k.var("n", 1, 4096)
    x, idx = k.param("x", dt, n), k.param("idx", dtypes.int32, n)
    src = k.param("src", dtypes.float32, n)
    out = k.param("out", dtypes.int64, n, writable=True)
    g = k.param("g", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = x[i].cast(dtypes.int64)
    g[i] = src[idx[i]]
    kern = k.build()
    args = dict(src=np.ones(3, np.float32), idx=np.array([0, 1, 2], np.int32), n=3)
    got = dk.run(kern, wg_device, x=np.array([1, fits, 5], dt.np), **args)
    np.testing.assert_array_equal(got["out"], [1, fits, 5])
    with pytest.raises(DataRangeError, match=rf"64-bit integer value from x \({dt.name}\).* is outside int32"):
        dk.run(kern, wg_device, x=np.array([1, bad, 5], dt.np), **args)
