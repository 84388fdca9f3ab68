"""Values that cross between a native CUDA vector (2/4/8/16 bytes: a `dk_*xN` struct) and a vector the C-style base
scalarizes lane by lane (any other size), through CAST and ALU ops and reduction accumulators.

Fuzz finds fz14, fz55, fz17 (tests/reliability/test_fuzz_regressions.py): a lane-wise op read a native operand whole
where one lane was expected (`(float)(val3)` for a dk_uint8x8 val3), and a native accumulator updated from lane-wise
values was assigned a Python list (`acc0 = ['...', ...]`). Each kernel is compiled with NVRTC when it is here, and run
on the host (cuda_host_emu) against the PYTHON reference.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import devicekit as dk
from cuda_host_emu import CXX, host_compile_many
from devicekit import ir
from devicekit.ir import dtypes
from devicekit.ir.uop import UOp
from devicekit_cuda.renderer import CUDARenderer

N = 5


def _lanes(x, base, dt_count):
    return ir.vectorize(*[x[base + j] for j in range(dt_count)])


def _cast_store(name, src, dst, count):
    """A vector of `count` src lanes loaded, cast to dst, every lane stored."""
    k = ir.KernelBuilder(name)
    n = k.var("n", 1, 4096)
    x = k.param("x", src, n * count)
    o = k.param("out", dst, n * count, writable=True)
    i = k.range(n, "global")
    v = _lanes(x, i * count, count).cast(dst.vec(count))
    for j in range(count):
        o[i * count + j] = v.gep(j)
    return k.build()


def _cast_one_lane(name, src, mid, dst, count, lane):
    """fz14 / fz55: cast (through mid) and store one lane."""
    k = ir.KernelBuilder(name)
    n = k.var("n", 1, 4096)
    x = k.param("x", src, n * count)
    o = k.param("out", dst, n * count, writable=True)
    i = k.range(n, "global")
    v = _lanes(x, i * count, count).cast(mid.vec(count))
    if mid != dst:
        v = v.cast(dst.vec(count))
    o[i * count] = v.gep(lane)
    return k.build()


def _reduce_cast(name, src, dst, count, op):
    """fz17: a reduction over r of a src vector (first lane loaded, the others 0) cast to dst; every lane stored."""
    k = ir.KernelBuilder(name)
    n = k.var("n", 1, 4096)
    m = k.var("m", 1, 64)
    x = k.param("x", src, n * m * count)
    o = k.param("out", dst, n * count, writable=True)
    i = k.range(n, "global")
    r = k.range(m, "reduce")
    v = ir.vectorize(*[x[(i * m + r) * count + j] for j in range(count)])
    red = getattr(v.cast(dst.vec(count)), op)(r)
    for j in range(count):
        o[i * count + j] = red.gep(j)
    return k.build()


def _reduce_fz17():
    k = ir.KernelBuilder("fz17")
    n = k.var("n", 1, 4096)
    m = k.var("m", 1, 64)
    x = k.param("x", dtypes.int64, n * m * 4)
    o = k.param("out", dtypes.int16, n, writable=True)
    i = k.range(n, "global")
    r = k.range(m, "reduce")
    zero = UOp.const(dtypes.int64, 0)
    v = ir.vectorize(x[(i * m + r) * 4], zero, zero, zero)
    o[i] = v.cast(dtypes.int16.vec(4)).prod(r).gep(0)
    return k.build()


def _mixed_alu(name):
    """A native float32x4 cast to a scalarized float64x4 and added to a scalarized float64x4; and the sum cast back
    to a native float32x4 and multiplied by the native original."""
    k = ir.KernelBuilder(name)
    n = k.var("n", 1, 4096)
    a = k.param("a", dtypes.float32, n * 4)
    b = k.param("b", dtypes.float64, n * 4)
    o = k.param("out", dtypes.float32, n * 4, writable=True)
    i = k.range(n, "global")
    va = _lanes(a, i * 4, 4)
    s = va.cast(dtypes.float64.vec(4)) + _lanes(b, i * 4, 4)
    v = s.cast(dtypes.float32.vec(4)) * va
    for j in range(4):
        o[i * 4 + j] = v.gep(j)
    return k.build()


def _kernels():
    i16, i64, u8, u64, f32, f64 = dtypes.int16, dtypes.int64, dtypes.uint8, dtypes.uint64, dtypes.float32, dtypes.float64
    return [
        ("fz14", _cast_one_lane("fz14", i16, u64, f64, 8, 7), {"x": (i16, 8)}),
        ("fz55", _cast_one_lane("fz55", u8, f32, f32, 8, 7), {"x": (u8, 8)}),
        ("fz17", _reduce_fz17(), {"x": (i64, 4), "m": 3}),
        ("i16x8_to_u64x8", _cast_store("i16x8_to_u64x8", i16, u64, 8), {"x": (i16, 8)}),
        ("u8x8_to_f32x8", _cast_store("u8x8_to_f32x8", u8, f32, 8), {"x": (u8, 8)}),
        ("i64x4_to_i16x4", _cast_store("i64x4_to_i16x4", i64, i16, 4), {"x": (i64, 4)}),
        ("f64x4_to_f32x4", _cast_store("f64x4_to_f32x4", f64, f32, 4), {"x": (f64, 4)}),
        ("f32x4_to_f64x4", _cast_store("f32x4_to_f64x4", f32, f64, 4), {"x": (f32, 4)}),
        ("sum_i64x4_as_i16x4", _reduce_cast("sum_i64x4_as_i16x4", i64, i16, 4, "sum"), {"x": (i64, 4), "m": 3}),
        ("max_f32x4_as_f64x4", _reduce_cast("max_f32x4_as_f64x4", f32, f64, 4, "max"), {"x": (f32, 4), "m": 3}),
        ("sum_u8x8_as_f32x8", _reduce_cast("sum_u8x8_as_f32x8", u8, f32, 8, "sum"), {"x": (u8, 8), "m": 3}),
        ("mixed_alu", _mixed_alu("mixed_alu"), {"a": (f32, 4), "b": (f64, 4)}),
    ]


def _inputs(kernel, spec):
    rng = np.random.default_rng(0)
    m = spec.get("m")
    out = {"n": N, **({"m": m} if m else {})}
    for p in kernel.params:
        if p.name in spec:
            dt, count = spec[p.name]
            size = N * (m or 1) * count
            vals = rng.uniform(-100, 100, size) if dt.is_float else rng.integers(0 if dt.is_unsigned else -100, 100,
                                                                                 size)
            out[p.name] = vals.astype(dt.np)
    return out


KERNELS = _kernels()
_host: dict = {}


@pytest.mark.parametrize("name,kernel,spec", KERNELS, ids=[k[0] for k in KERNELS])
def test_mixed_vectors_render_no_python_list(name, kernel, spec):
    src = CUDARenderer().render(kernel).src
    assert "['" not in src and "[\"" not in src


@pytest.mark.parametrize("name,kernel,spec", KERNELS, ids=[k[0] for k in KERNELS])
def test_mixed_vectors_compile_with_nvrtc(name, kernel, spec):
    try:
        t = dk.target("CUDA")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no CUDA compile toolchain here: {e}")
    r, c = t.pair(0)
    c.compile(r.render(kernel))


@pytest.mark.skipif(CXX is None, reason="no host C++ compiler (g++/clang++) for the emulation tests")
@pytest.mark.parametrize("name,kernel,spec", KERNELS, ids=[k[0] for k in KERNELS])
def test_mixed_vectors_match_the_reference(name, kernel, spec):
    if not _host:
        _host.update(host_compile_many([k for _, k, _ in KERNELS]))
    inputs = _inputs(kernel, spec)
    want = dk.run(kernel, device="PYTHON", **inputs)
    got = _host[kernel.name](**inputs)
    for p in kernel.params:
        if p.writable:
            np.testing.assert_array_equal(got[p.name], np.asarray(want[p.name]).reshape(-1), err_msg=name)
