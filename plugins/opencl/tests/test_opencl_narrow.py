"""`ir.narrow.narrowed` through the OpenCL renderer's `narrow=True` (off by default: on PoCL it measured slower,
docs/decisions.md): int64 index arithmetic in int32 only where the bounds prove it exact for every launch, and
the same results as the int64 kernel. Each rule of `narrowed` has a kernel here that computes a wrong value (or does
not compile) without it."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir, kernels
from devicekit.ir.dtypes import dtypes
from devicekit.ir.linearize import lower
from devicekit.ir.narrow import narrowed


@pytest.fixture(scope="module")
def pair(cl_device):
    from devicekit_opencl.renderer import OpenCLRenderer
    r0, comp = cl_device.compilers[0]
    return OpenCLRenderer(*r0.__reduce__()[1][:8], narrow=True), comp


def _run(dev, pair, kern, **inputs):
    r, comp = pair
    prog = dev.runtime(comp.compile(r.render(kern)))
    return dk.run(prog, dev, **inputs)


def _lk(pair, kern):
    return lower(kern, pair[0].capabilities)


def test_library_kernels_narrow_and_match_numpy(cl_device, pair):
    """elementwise (i < n <= 2**31 - 1) and matmul (fixed sizes) are narrowed: fewer `long`s, same results."""
    from devicekit_opencl.renderer import OpenCLRenderer
    plain = OpenCLRenderer(*pair[0].__reduce__()[1][:8])
    rng = np.random.default_rng(3)
    ew = kernels.elementwise("a * b + c")
    mm = kernels.matmul(48, 40, 24, device=cl_device)
    for k in (ew, mm):
        assert narrowed(_lk(pair, k)) is not None
        assert pair[0].render(k).src.count("long") < plain.render(k).src.count("long")
    a, b, c = (rng.standard_normal(1000).astype(np.float32) for _ in range(3))
    np.testing.assert_array_equal(_run(cl_device, pair, ew, a=a, b=b, c=c, n=1000)["out"], a * b + c)
    x, y = rng.standard_normal((48, 24)).astype(np.float32), rng.standard_normal((24, 40)).astype(np.float32)
    got = _run(cl_device, pair, mm, a=x.ravel(), b=y.ravel())["c"]
    np.testing.assert_allclose(got.reshape(48, 40), x @ y, rtol=1e-4, atol=1e-4)


def test_values_past_int32_are_not_narrowed(cl_device, pair):
    """n declared up to 2**40: i + n is not proven to fit, so the kernel stays int64 (2**33 + i, not a wrapped one)."""
    k = ir.KernelBuilder("dk_narrow_wide")
    n = k.var("n", 0, 2**40)
    out = k.param("out", dtypes.int64, 8, writable=True)
    i = k.range(8, "global")
    out[i] = i + n
    assert narrowed(_lk(pair, k.build())) is None
    got = _run(cl_device, pair, k.build(), n=2**33)["out"]
    np.testing.assert_array_equal(got, np.arange(8) + 2**33)


def test_shifts_past_31_are_not_narrowed(cl_device, pair):
    """An int64 shifted right by 40 is 0 for small values; int32 would shift by 40 & 31 = 8."""
    k = ir.KernelBuilder("dk_narrow_shift")
    s = k.var("s", 0, 63)
    out = k.param("out", dtypes.int32, 8, writable=True)
    i = k.range(8, "global")
    out[i] = ((i * 300) >> s).cast(dtypes.int32)
    assert narrowed(_lk(pair, k.build())) is None
    got = _run(cl_device, pair, k.build(), s=40)["out"]
    np.testing.assert_array_equal(got, np.zeros(8, np.int32))


def test_bitcasts_of_int64_are_not_narrowed(cl_device, pair):
    """bitcast(int64 -> float64) needs the 8 bytes: narrowed, it would bitcast an int."""
    k = ir.KernelBuilder("dk_narrow_bitcast")
    out = k.param("out", dtypes.float64, 8, writable=True)
    i = k.range(8, "global")
    out[i] = (i + 1).bitcast(dtypes.float64)
    assert narrowed(_lk(pair, k.build())) is None
    got = _run(cl_device, pair, k.build())["out"]
    np.testing.assert_array_equal(got.view(np.int64), np.arange(1, 9))


def test_random_kernels_with_narrowing_match_the_reference(cl_device, monkeypatch):
    """A bounded sample of the differential fuzzer (profile mixed) with every OPENCL renderer narrowing."""
    from devicekit.testing.fuzz import fuzz
    from devicekit_opencl.renderer import OpenCLRenderer
    monkeypatch.setattr(OpenCLRenderer, "narrow", True)
    rep = fuzz(30, 70000, "OPENCL", profile="mixed", jobs=1)
    assert rep.tried == 30 and not rep.findings, [str(f) for f in rep.findings]
