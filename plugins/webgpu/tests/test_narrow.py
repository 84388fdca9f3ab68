"""devicekit.ir.narrow: int64 index arithmetic is narrowed to int32 only where the bounds prove it fits (no device
needed: this is the core pass every renderer may call)."""

from __future__ import annotations

import pytest
from devicekit import ir, kernels
from devicekit.errors import DataRangeError
from devicekit.ir.accept import as_kernel
from devicekit.ir.dtypes import dtypes
from devicekit.ir.linearize import lower
from devicekit.ir.narrow import fits_32, launch_check, narrow_check, narrow_plan
from devicekit.ir.uop import KernelError
from devicekit_webgpu.renderer import WGSLRenderer

R = WGSLRenderer()


def _lk(k):
    return lower(as_kernel(k, "test"), R.capabilities)


def test_elementwise_fits_for_every_launch():
    # n up to 2**31 - 1: (n + 255) // 256 is launch-only, gidx * 256 + lidx stays below 2**31
    lk = _lk(kernels.elementwise("a * b + c"))
    assert fits_32(lk)
    narrow_check(lk, "T")
    assert narrow_plan(lk, "T") == ()


def test_product_of_vars_is_guarded_per_launch():
    lk = _lk(kernels.all_kernels()["transpose"]())
    assert not fits_32(lk)
    with pytest.raises(KernelError, match="does not support 64-bit integer values"):
        narrow_check(lk, "T")
    guards = narrow_plan(lk, "T")
    assert guards
    names = {u.arg[0] for g in guards for u in g.toposort() if u.op is ir.Ops.VAR}
    small = dict.fromkeys(names, 64)
    launch_check(guards, small, "T", "transpose")  # 64 x 64 fits
    with pytest.raises(DataRangeError, match="outside int32"):  # a documented limit: the fuzzer's "unsupported"
        launch_check(guards, dict.fromkeys(names, 70000), "T", "transpose")  # 70000**2 > 2**31


def test_unbounded_int64_is_refused_by_name():
    k = ir.KernelBuilder("argmax_like")
    n = k.var("n", 1, 1000)
    a, out = k.param("a", dtypes.int64, n), k.param("out", dtypes.int64, n, writable=True)
    i = k.range(n, "global")
    out[i] = a[i] + 1
    with pytest.raises(KernelError, match="does not support"):
        narrow_plan(_lk(k.build()), "T")
