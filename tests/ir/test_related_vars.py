"""Var bounds that name earlier vars (`k.var("kk", 0, n - 1)`): checked at every launch, used by the bounds proof."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit.ir.linearize import lower

DEVICES = ["PYTHON", "CPU"]


def _scale_by(hi_rel: bool = True):
    """o[i] = x[i] * x[kk], kk < n: without the relation x[kk] is refused (kk may be 1 with n = 1)."""
    k = ir.KernelBuilder("scale_by")
    n = k.var("n", 1, 64)
    kk = k.var("kk", 0, n - 1 if hi_rel else 63)
    x, o = k.param("x", dtypes.float32, n), k.param("o", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    o[i] = x[i] * x[kk]
    return k.build()


def _window():
    """o[t] = x[lo + t] for lo <= hi < n, t < hi - lo + 1: a relation on each side."""
    k = ir.KernelBuilder("window")
    n = k.var("n", 1, 64)
    lo = k.var("lo", 0, n - 1)
    hi = k.var("hi", lo, n - 1)
    x, o = k.param("x", dtypes.float32, n), k.param("o", dtypes.float32, n, writable=True)
    t = k.range(hi - lo + 1, "global")
    o[t] = x[lo + t]
    return k.build()


def test_the_relation_proves_the_access():
    caps = dk.device("CPU").renderer.capabilities
    assert lower(_scale_by(), caps).checks is None
    assert lower(_window(), caps).checks is None
    with pytest.raises(ir.KernelError, match="index into x out of bounds: reaches 1, size is 1 with n=1, kk=1"):
        _scale_by(hi_rel=False)  # the same access without the relation: provably out of bounds for n = 1


@pytest.mark.parametrize("device", DEVICES)
def test_related_vars_run_and_are_checked_at_launch(device):
    x = np.arange(5, dtype=np.float32) + 1
    np.testing.assert_array_equal(dk.run(_scale_by(), device, x=x, n=5, kk=3)["o"], x * x[3])
    with pytest.raises(ValueError, match=r"var kk=5 is outside its declared range \[0, n - 1 = 4\]"):
        dk.run(_scale_by(), device, x=x, n=5, kk=5)
    got = dk.run(_window(), device, x=x, n=5, lo=1, hi=3)["o"]
    np.testing.assert_array_equal(got[:3], x[1:4])
    with pytest.raises(ValueError, match=r"var hi=0 is outside its declared range \[lo = 1, n - 1 = 4\]"):
        dk.run(_window(), device, x=x, n=5, lo=1, hi=0)


def test_the_cpu_fast_path_checks_the_relation():
    cpu = dk.device("CPU")
    prog = cpu.compile(_scale_by())
    bx, bo = dk.Buffer(cpu, 5, dtypes.float32), dk.Buffer(cpu, 5, dtypes.float32)
    bx.copyin(np.ones(5, np.float32))
    prog.execute([bx, bo], [5, 4])
    with pytest.raises(ValueError, match="var kk=5"):
        prog.execute([bx, bo], [5, 5])


def test_a_relation_may_only_name_earlier_vars():
    k = ir.KernelBuilder("k")
    n = k.var("n", 1, 8)
    other = ir.KernelBuilder("other").var("m", 1, 8)
    with pytest.raises(ir.KernelError, match="uses var m, which is not an earlier var of kernel k"):
        k.var("a", 0, other)
    x = k.param("x", dtypes.float32, n)
    with pytest.raises(ir.KernelError, match="may only use earlier vars and constants"):
        k.var("b", 0, x[0].cast(dtypes.int64))


def _diagonal(j0_hi_offset: int = 1):
    """One anti-diagonal of an n x n grid: a[lo + t, j0 - t] from its upper and left neighbours, t < cnt, with
    cnt <= n - lo and cnt <= j0 <= n - j0_hi_offset: the proof must keep t < cnt and cnt's own bound together."""
    k = ir.KernelBuilder("diagonal")
    n = k.var("n", 2, 64)
    lo = k.var("lo", 1, n - 1)
    cnt = k.var("cnt", 1, n - lo)
    j0 = k.var("j0", cnt, n - j0_hi_offset)
    a = k.param("a", dtypes.float32, shape=(n, n), writable=True)
    t = k.range(cnt, "global")
    i, j = lo + t, j0 - t
    a[i, j] = (a[i - 1, j] + a[i, j - 1]) * 0.5
    return k.build()


def test_bounds_that_cancel_through_a_range_are_proven_and_one_past_is_not():
    caps = dk.device("CPU").renderer.capabilities
    assert lower(_diagonal(), caps).checks is None  # lo + t <= lo + cnt - 1 <= n - 1 and j0 - t >= j0 - cnt + 1 >= 1
    with pytest.raises(ir.KernelError, match="index 1 into a reaches 2, dimension 1 has 2 with n=2, lo=1, cnt=1, j0=2"):
        _diagonal(j0_hi_offset=0)  # j0 may be n: a[i, n] is outside its row, and the verifier says where
    a = np.arange(16, dtype=np.float32)
    for spec in DEVICES:  # a valid diagonal agrees with numpy
        out = dk.run(_diagonal(), spec, a=a, n=4, lo=1, cnt=3, j0=3)["a"].reshape(4, 4)
        want = a.reshape(4, 4).copy()
        for t in range(3):
            want[1 + t, 3 - t] = (want[t, 3 - t] + want[1 + t, 2 - t]) * 0.5
        np.testing.assert_allclose(out, want, err_msg=spec)
