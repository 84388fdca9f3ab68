"""Compiler bugs the llvm pair works around, each checked against the PYTHON reference on the kernels that showed it."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit.testing.devices import device_for
from devicekit_cpu.llvm_compiler import slp_safe


def _widen_then_float(mid, dst, lanes: int = 8):
    """out[i*L + u] = float(uint(x[i*L + u])) over an unroll range: L independent chains the SLP vectorizer packs."""
    k = ir.KernelBuilder(f"widen_{mid.name}_{dst.name}")
    n = k.var("n", 1, 64)
    x = k.param("x", dtypes.int8, n * lanes)
    out = k.param("out", dst, n * lanes, writable=True)
    i, u = k.range(n, "global"), k.range(lanes, "unroll")
    out[i * lanes + u] = x[i * lanes + u].cast(mid).cast(dst)
    return k.build()


@pytest.mark.parametrize("mid,dst", [(dtypes.uint32, dtypes.float16), (dtypes.uint64, dtypes.float32),
                                     (dtypes.uint64, dtypes.float16), (dtypes.uint32, dtypes.float64)])
def test_uitofp_of_a_sign_extension_is_not_narrowed(mid, dst):
    """LLVM 22's SLP vectorizer narrowed `uitofp (sext x)` to the float's width (-21 -> uint32 -> float16 gave 65504
    for inf; -> uint64 -> float32 gave 4.29e9 for 1.84e19; fuzz seed 3002524): such modules skip SLP."""
    kern = _widen_then_float(mid, dst)
    x = np.array([-21, -1, 100, -128, 0, 127, -2, 5] * 3, dtype=np.int8)
    want = dk.run(kern, "PYTHON", x=x, n=3)["out"]
    assert np.isinf(want[0]) or want[0] > 2**31  # the case is the one that overflows the narrow type
    np.testing.assert_array_equal(dk.run(kern, device_for("CPU/llvm"), x=x, n=3)["out"], want)


def test_the_sum_that_found_it():
    """Shrunk from fuzz seed 3002524: inf (int8 -> uint32 -> float16) times 0 must give NaN, not 0."""
    k = ir.KernelBuilder("rand3002524")
    n, m = k.var("n", 1, 4096), k.var("m", 1, 64)
    x = k.param("in0", dtypes.int8, n * m)
    out = k.param("out", dtypes.float16, n, writable=True)
    i, r = k.range(n, "global"), k.range(m, "reduce")
    v = x[i * m + r]
    h = v.cast(dtypes.float16)
    out[i] = (v.cast(dtypes.uint32).cast(dtypes.float16) * ((h - h) * h)).sum(r)
    kern = k.build()
    inputs = {"in0": np.array([-21, -60, -55, 2], dtype=np.int8), "n": 1, "m": 4}
    assert np.isnan(dk.run(kern, "PYTHON", **inputs)["out"][0])
    assert np.isnan(dk.run(kern, device_for("CPU/llvm"), **inputs)["out"][0])


def test_slp_safe_reads_the_pattern():
    assert slp_safe("%t1 = sext i8 %x to i32\n%t2 = sitofp i32 %t1 to float")
    assert not slp_safe("%t1 = sext i8 %x to i32\n%t2 = uitofp i32 %t1 to half")
    assert not slp_safe("%t1 = sext <4 x i8> %x to <4 x i64>\n%t2 = uitofp <4 x i64> %t1 to <4 x float>")
    assert slp_safe("%t1 = zext i8 %x to i32\n%t2 = uitofp i32 %t1 to half")
