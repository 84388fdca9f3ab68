"""Every kernel renders to MSL that parses (libclang + the shim) and, when barrier-free, computes what the PYTHON
reference computes when compiled for the host with g++ through the shim (threads as loop variables)."""

from __future__ import annotations

import itertools
import os
import warnings

import numpy as np
import pytest
from devicekit import ir, settings
from devicekit.ir import dtypes
from devicekit.ir.dtypes import bf16_to_f32, from_numpy_values
from devicekit_metal.hostcheck import HostKernel, cxx, libclang_available, syntax_check
from devicekit_metal.renderer import MetalRenderer

warnings.filterwarnings("ignore", message=".*plugin.*")

f32, f16, bf16, i32, i64, i8, u8, u32 = (dtypes.float32, dtypes.float16, dtypes.bfloat16, dtypes.int32, dtypes.int64,
                                         dtypes.int8, dtypes.uint8, dtypes.uint32)


# ------------------------------------------------------------------ the corpus (KernelBuilder)
def k_saxpy():
    k = ir.KernelBuilder("saxpy")
    n = k.var("n", 1, 1 << 20)
    x, y = k.param("x", f32, n), k.param("y", f32, n)
    out = k.param("out", f32, n, writable=True)
    i = k.range(n, "global")
    out[i] = x[i] * 2.5 + y[i]
    return k.build(), {"n": 1000}


def k_math():
    k = ir.KernelBuilder("fmath")
    n = k.var("n", 1, 1 << 20)
    x = k.param("x", f32, n)
    outs = [k.param(f"o{j}", f32, n, writable=True) for j in range(8)]
    i = k.range(n, "global")
    v = x[i]
    a = v * v + 0.25
    outs[0][i] = ir.exp2(v)
    outs[1][i] = ir.log2(a)
    outs[2][i] = ir.sin(v)
    outs[3][i] = ir.sqrt(a)
    outs[4][i] = ir.trunc(v * 3.0)
    outs[5][i] = ir.recip(a)
    outs[6][i] = ir.where(v < 0.0, -v, v * 0.5)
    outs[7][i] = ir.maximum(v, 0.125) - ir.minimum(v, -0.5) + v / a
    return k.build(), {"n": 517}


def k_intops():
    k = ir.KernelBuilder("intops")
    n = k.var("n", 1, 1 << 20)
    a, b = k.param("a", i32, n), k.param("b", i32, n)
    outs = [k.param(f"o{j}", i32, n, writable=True) for j in range(6)]
    i = k.range(n, "global")
    x, y = a[i], b[i]
    y = ir.where(y.eq(0), 1, y)
    outs[0][i] = x // y
    outs[1][i] = x % y
    outs[2][i] = (x << (y & 7)) ^ (x >> 3)
    outs[3][i] = (x & 0xFF) | (y & 0x0F00)
    outs[4][i] = ir.where(x < y, x, y) + ir.maximum(x, y)
    outs[5][i] = -x * 3 - y
    return k.build(), {"n": 300}


def k_small_ints():
    k = ir.KernelBuilder("small_ints")
    n = k.var("n", 1, 1 << 20)
    a, b = k.param("a", i8, n), k.param("b", u8, n)
    o1, o2 = k.param("o1", i8, n, writable=True), k.param("o2", u8, n, writable=True)
    i = k.range(n, "global")
    o1[i] = (a[i] * a[i] + 100) // 3
    o2[i] = (b[i] * 7 + 200) // 5
    return k.build(), {"n": 256}


def k_casts():
    k = ir.KernelBuilder("casts")
    n = k.var("n", 1, 1 << 20)
    x, a = k.param("x", f32, n), k.param("a", i32, n)
    o1, o2 = k.param("o1", i32, n, writable=True), k.param("o2", f32, n, writable=True)
    o3, o4 = k.param("o3", u32, n, writable=True), k.param("o4", dtypes.bool, n, writable=True)
    o5 = k.param("o5", i64, n, writable=True)
    i = k.range(n, "global")
    o1[i] = (x[i] * 100.0).cast(i32)
    o2[i] = a[i].cast(f32) * 0.5
    o3[i] = x[i].bitcast(u32)
    o4[i] = (x[i] < 0.0) | a[i].cast(dtypes.bool)
    o5[i] = a[i].cast(i64) * 3_000_000_000 + n
    return k.build(), {"n": 129}


def k_half():
    k = ir.KernelBuilder("halfk")
    n = k.var("n", 1, 1 << 20)
    x = k.param("x", f16, n)
    o1, o2 = k.param("o1", f16, n, writable=True), k.param("o2", f32, n, writable=True)
    i = k.range(n, "global")
    o1[i] = x[i] * x[i] + 1.5
    o2[i] = ir.exp2(x[i]).cast(f32) + ir.sqrt(x[i] * x[i]).cast(f32)
    return k.build(), {"n": 100}


def k_bf16():
    k = ir.KernelBuilder("bf16k")
    n = k.var("n", 1, 1 << 20)
    x, y = k.param("x", bf16, n), k.param("y", f32, n)
    o1, o2 = k.param("o1", bf16, n, writable=True), k.param("o2", f32, n, writable=True)
    i = k.range(n, "global")
    o1[i] = x[i] * 2.0 + y[i].cast(bf16)
    o2[i] = ir.maximum(x[i], y[i].cast(bf16)).cast(f32)
    return k.build(), {"n": 100}


def k_rowsum():
    k = ir.KernelBuilder("rowreduce")
    m, n = k.var("m", 1, 4096), k.var("n", 1, 4096)
    a = k.param("a", f32, m * n)
    s, mx, p = (k.param(nm, f32, m, writable=True) for nm in ("s", "mx", "p"))
    i = k.range(m, "global")
    j = k.range(n, "reduce")
    s[i] = a[i * n + j].sum(j)
    j2 = k.range(n, "reduce")
    mx[i] = a[i * n + j2].max(j2)
    j3 = k.range(n, "reduce")
    p[i] = (a[i * n + j3] * 0.1 + 1.0).prod(j3)
    return k.build(), {"m": 37, "n": 19}


def k_matmul():
    k = ir.KernelBuilder("matmul")
    m, n, kk = k.var("m", 1, 1024), k.var("n", 1, 1024), k.var("kk", 1, 1024)
    a, b = k.param("a", f32, m * kk), k.param("b", f32, kk * n)
    c = k.param("c", f32, m * n, writable=True)
    i, j = k.range(m, "global"), k.range(n, "global")
    r = k.range(kk, "reduce")
    c[i * n + j] = (a[i * kk + r] * b[r * n + j]).sum(r)
    return k.build(), {"m": 13, "n": 17, "kk": 9}


def k_softmax():
    k = ir.KernelBuilder("softmax")
    m, n = k.var("m", 1, 4096), k.var("n", 1, 4096)
    x = k.param("x", f32, m * n)
    out = k.param("out", f32, m * n, writable=True)
    i, j = k.range(m, "global"), k.range(n, "loop")
    r1, r2 = k.range(n, "reduce"), k.range(n, "reduce")
    mx = x[i * n + r1].max(r1)
    den = ir.exp(x[i * n + r2] - mx).sum(r2)
    out[i * n + j] = ir.exp(x[i * n + j] - mx) / den
    return k.build(), {"m": 11, "n": 23}


def k_transpose3d():
    k = ir.KernelBuilder("transpose3d")
    a_, b_, c_ = k.var("A", 1, 64), k.var("B", 1, 64), k.var("C", 1, 64)
    x = k.param("x", i32, a_ * b_ * c_)
    out = k.param("out", i32, a_ * b_ * c_, writable=True)
    i, j, l = k.range(a_, "global"), k.range(b_, "global"), k.range(c_, "global")
    out[l * a_ * b_ + j * a_ + i] = x[i * b_ * c_ + j * c_ + l]
    return k.build(), {"A": 3, "B": 5, "C": 7}


def k_vectors():
    k = ir.KernelBuilder("vectors")
    n = k.var("n", 1, 1 << 16)
    x = k.param("x", f32, n * 8)
    o4, o8 = k.param("o4", f32, n, writable=True), k.param("o8", f32, n, writable=True)
    i = k.range(n, "global")
    v4 = ir.vectorize(*(x[i * 8 + t] for t in range(4)))
    w4 = v4 * 2.0 + v4
    o4[i] = w4[0] + w4[1] * w4[2] - w4[3]
    v8 = ir.vectorize(*(x[i * 8 + t] for t in range(8)))
    w8 = ir.maximum(v8 * v8, v8 + 1.0)
    o8[i] = w8[0] + w8[3] + w8[7]
    return k.build(), {"n": 40}


def k_small_vectors():
    """char4 / half4 / bool4 native vectors: narrow results are cast back to the vector type."""
    k = ir.KernelBuilder("small_vectors")
    n = k.var("n", 1, 1 << 16)
    x, h = k.param("x", i8, n * 4), k.param("h", f16, n * 4)
    o, oh = k.param("o", i8, n, writable=True), k.param("oh", f16, n, writable=True)
    i = k.range(n, "global")
    v = ir.vectorize(*(x[i * 4 + t] for t in range(4))) * 3 + 100
    o[i] = v[0] + v[3] - v[1] // 7
    w = ir.vectorize(*(h[i * 4 + t] for t in range(4))) * 1.5
    m = ir.where(w < 0.5, w, -w)
    oh[i] = m[1] + m[2]
    return k.build(), {"n": 77}


def k_gated():
    k = ir.KernelBuilder("stencil")
    n = k.var("n", 2, 1 << 20)
    x = k.param("x", f32, n)
    out = k.param("out", f32, n, writable=True)
    i = k.range(n, "global")
    left = x.load(i - 1, gate=i > 0, default=0.0)
    right = x.load(i + 1, gate=i < n - 1, default=0.0)
    out[i] = left + x[i] * 2.0 + right
    return k.build(), {"n": 300}


def k_unroll():
    k = ir.KernelBuilder("unrolled")
    n = k.var("n", 1, 1 << 16)
    x = k.param("x", f32, n * 4)
    out = k.param("out", f32, n, writable=True)
    i, u = k.range(n, "global"), k.range(4, "unroll")
    out[i] = (x[i * 4 + u] * 1.5).sum(u)
    return k.build(), {"n": 70}


def k_specials():
    k = ir.KernelBuilder("specials")
    n = k.var("n", 1, 1 << 16)
    x = k.param("x", f32, n)
    out = k.param("out", f32, n, writable=True)
    o2 = k.param("o2", i64, n, writable=True)
    i = k.range(n, "global")
    nan = x[i] * 0.0 + float("nan")
    out[i] = ir.where(x[i] < 0.0, float("inf"), ir.where(x[i] > 0.5, nan, -float("inf")))
    lo = i * 0 + (-(2**63))
    o2[i] = ir.where(x[i] < 0.0, lo, 2**63 - 1)
    return k.build(), {"n": 50}


def k_local_sum():
    """Needs a barrier: the host emulation runs each threadgroup's threads concurrently (std::barrier)."""
    k = ir.KernelBuilder("blocksum")
    g = k.var("g", 1, 1 << 16)
    x = k.param("x", f32, g * 64)
    out = k.param("out", f32, g, writable=True)
    gi, li = k.range(g, "global"), k.range(64, "local")
    sm = k.local("sm", f32, 64)
    sm[li] = x[gi * 64 + li]
    k.barrier()
    r = k.range(64, "reduce")
    out[gi] = sm[r].sum(r)
    return k.build(), {"g": 3}


def k_tile_transpose():
    """2-D threadgroups, a padded threadgroup tile, two barriers (load, reuse)."""
    k = ir.KernelBuilder("tile_transpose")
    gx, gy = k.var("gx", 1, 64), k.var("gy", 1, 64)
    x = k.param("x", f32, gx * gy * 64)
    out = k.param("out", f32, gx * gy * 64, writable=True)
    bi, bj = k.range(gy, "global"), k.range(gx, "global")
    ti, tj = k.range(8, "local"), k.range(8, "local")
    tile = k.local("tile", f32, 8 * 9)
    width = gx * 8
    tile[ti * 9 + tj] = x[(bi * 8 + ti) * width + bj * 8 + tj]
    k.barrier()
    v = tile[tj * 9 + ti]
    k.barrier()
    tile[ti * 9 + tj] = v * 2.0
    k.barrier()
    out[(bj * 8 + ti) * (gy * 8) + bi * 8 + tj] = tile[ti * 9 + tj]
    return k.build(), {"gx": 3, "gy": 2}


CORPUS = {f.__name__[2:]: f for f in (k_saxpy, k_math, k_intops, k_small_ints, k_casts, k_half, k_bf16, k_rowsum,
                                      k_matmul, k_softmax, k_transpose3d, k_vectors, k_small_vectors, k_gated, k_unroll, k_specials,
                                      k_local_sum, k_tile_transpose)}


def _library_kernels():
    """name -> (make kernel, make inputs or None) for devicekit.kernels: all_kernels() with their example inputs,
    plus half / bfloat16 variants (inputs generated from the signature)."""
    try:
        from devicekit import kernels as K
    except ImportError:
        return {}
    lib = {f"lib_{n}": (make, (lambda n=n: K.example_inputs(n))) for n, make in K.all_kernels().items()}
    variants = {
        "elementwise_fma_f16": lambda: K.elementwise("a * b + c", dtype=f16, name="ew_f16"),
        "elementwise_math_bf16": lambda: K.elementwise("where(a < 0.0, exp2(a), sqrt(a) + sin(b))", dtype=bf16,
                                                       name="ew_math_bf16"),
        "reduce_sum_f16": lambda: K.reduce("sum", dtype=f16),
        "reduce_max_bf16": lambda: K.reduce("max", dtype=bf16),
        "softmax_f16": lambda: K.softmax(dtype=f16),
        "transpose_i8": lambda: K.transpose(dtype=i8),
        "matmul_f16": lambda: K.matmul(8, 8, 8, dtype=f16),
        "mlp_layer_bf16": lambda: K.mlp_layer(8, 4, 4, dtype=bf16),
    }
    for n, make in variants.items():
        lib[f"lib_{n}"] = (make, None)
    return lib


LIB = _library_kernels()


# ------------------------------------------------------------------ helpers
def _default_vars(kernel) -> dict[str, int]:
    return {v.name: max(v.lo, min(v.hi, 33)) for v in kernel.vars}


def _inputs(spec, var_vals, seed=0):
    rng = np.random.default_rng(seed)
    sizes = spec.buffer_sizes(var_vals)
    arrays = {}
    for p, n in zip(spec.params, sizes):
        d = p.dtype
        if d.is_float:
            vals = rng.standard_normal(n).astype(np.float32 if d == bf16 else d.np)
        elif d.is_bool:
            vals = rng.integers(0, 2, n).astype(bool)
        else:
            info = np.iinfo(d.np)
            lo, hi = max(info.min, -1000), min(info.max, 1000)
            vals = rng.integers(lo, hi, n, endpoint=True).astype(d.np)
        arrays[p.name] = vals if p.writable is False else np.zeros(n, d.np_compute if d != bf16 else np.float32)
    return arrays


def _tolerance(dt):
    if dt == f16:
        return {"rtol": 2e-3, "atol": 2e-3}
    if dt == bf16:
        return {"rtol": 1.6e-2, "atol": 1.6e-2}
    return {"rtol": 2e-5, "atol": 1e-6}


def _lowering_defect(kern, numerics: bool = False) -> str | None:
    """A linear form whose ALU operands disagree in lane count, or a threadgroup load moved past its barrier, is a
    core lowering bug: the tests fail with it named (these tests exist to catch it; an xfail would hide it)."""
    from devicekit.ir.linearize import lower
    from devicekit.ir.ops import ALU, Ops
    uops = lower(kern, MetalRenderer().capabilities).uops
    mem = [u for u in uops if u.op in (Ops.LOAD, Ops.STORE, Ops.BARRIER)]
    if numerics and any(a.op is Ops.BARRIER and b.op is Ops.BARRIER for a, b in itertools.pairwise(mem)):
        return ("core scheduling bug: two barriers with no memory access between them, i.e. a threadgroup load the "
                "kernel reads before a barrier was moved after it (ir/linearize.py scheduler: write-after-read "
                "across barriers)")
    for u in uops:
        if u.op in ALU and u.op is not Ops.WHERE:
            counts = {s.dtype.count for s in u.src} | {u.dtype.count}
            if len(counts) > 1:
                return (f"core lowering bug: {u.short()} mixes {[s.dtype for s in u.src]} (half/bfloat16 vector "
                        "reduce: ir/passes.py promote_half builds a scalar float32 REDUCE for a vector source)")
    return None


def _python_available():
    import devicekit as dk
    try:
        dk.device("PYTHON")
    except Exception as e:  # noqa: BLE001
        return str(e)
    return None


# ------------------------------------------------------------------ tests
def _make(name):
    """(kernel, var values, given inputs or None)."""
    if name in CORPUS:
        kern, var_vals = CORPUS[name]()
        return kern, var_vals, None
    make, inputs = LIB[name]
    kern = make()
    if inputs is None:
        return kern, _default_vars(kern), None
    given = inputs()
    return kern, {v.name: int(given[v.name]) for v in kern.vars}, given


@pytest.mark.parametrize("name", list(CORPUS) + list(LIB))
def test_renders_and_parses(name):
    if (why := libclang_available()) is not None:
        pytest.skip(why)
    kern = _make(name)[0]
    if (bug := _lowering_defect(kern)) is not None:
        pytest.fail(bug)
    spec = MetalRenderer().render(kern)
    assert spec.lang == "metal" and spec.device == "METAL"
    assert spec.src.startswith("#include <metal_stdlib>")
    assert f"kernel void {spec.entry}(" in spec.src
    errs = syntax_check(spec.src)
    assert not errs, "\n".join(errs) + "\n" + spec.src


@pytest.mark.parametrize("name", list(CORPUS) + list(LIB))
def test_host_emulation_matches_python(name, tmp_path):
    if cxx() is None:
        pytest.skip("no C++ compiler for the host emulation")
    if (why := _python_available()) is not None:
        pytest.skip(f"PYTHON reference device unavailable: {why}")
    import devicekit as dk
    kern, var_vals, given = _make(name)
    if (bug := _lowering_defect(kern, numerics=True)) is not None:
        pytest.fail(bug)
    spec = MetalRenderer().render(kern)
    ins = _inputs(spec, spec.check_vars([var_vals[v.name] for v in spec.vars]))
    if given is not None:
        ins.update({p.name: np.asarray(given[p.name]).reshape(-1) for p in spec.params if p.name in given})
    readonly = {p.name: ins[p.name] for p in spec.params if not p.writable}
    ref = dk.run(kern, device="PYTHON", **readonly, **var_vals)
    host = HostKernel(spec, MetalRenderer(), workdir=str(tmp_path))
    arrays = []
    for p in spec.params:
        a = ins[p.name]
        arrays.append(np.ascontiguousarray(from_numpy_values(a, p.dtype)) if not p.writable
                      else np.zeros(a.shape[0], p.dtype.np))
    host.run(arrays, [var_vals[v.name] for v in spec.vars])
    if spec.checks is not None:  # the hidden bounds-check record: no access of these kernels is out of bounds
        assert spec.checks.error(arrays[-1], spec.buffer_sizes(var_vals), var_vals) is None
    for p, got in zip(spec.user_params, arrays):
        if not p.writable:
            continue
        want = np.asarray(ref[p.name]).reshape(-1)
        got = bf16_to_f32(got) if p.dtype == bf16 else got
        if p.dtype.is_float:
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), equal_nan=True,
                                       err_msg=f"{name}.{p.name}\n{spec.src}", **_tolerance(p.dtype))
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{name}.{p.name}\n{spec.src}")


# ------------------------------------------------------------------ differential fuzzing (core's random kernels)
def _random_kernels():
    try:
        from devicekit.testing import random_kernels as RK
    except ImportError:
        return None
    return RK


_RK = _random_kernels()
# 16 here (each is a C++ compile of the emulation, ~0.85 s; the METAL fuzz in tests/reliability renders 100 more),
# 160 under DEVICEKIT_SLOW=1, DK_METAL_FUZZ_SEEDS to choose
FUZZ_SEEDS = list(range(int(os.environ.get("DK_METAL_FUZZ_SEEDS", "160" if settings.get("DEVICEKIT_SLOW") else "16"))))


@pytest.mark.skipif(_RK is None, reason="devicekit.testing.random_kernels is not available")
@pytest.mark.parametrize("seed", FUZZ_SEEDS)
def test_random_kernel_host_emulation(seed, tmp_path):
    if cxx() is None:
        pytest.skip("no C++ compiler for the host emulation")
    if (why := _python_available()) is not None:
        pytest.skip(f"PYTHON reference device unavailable: {why}")
    import devicekit as dk
    pool = tuple(d for d in _RK.ALL_DTYPES if d != dtypes.float64)  # Metal has no double
    rk = _RK.random_kernel(seed, pool=pool)
    kern = rk.kernel
    if (bug := _lowering_defect(kern)) is not None:
        pytest.fail(bug)
    spec = MetalRenderer().render(kern)
    if libclang_available() is None:
        assert not syntax_check(spec.src), spec.src
    ref = dk.run(kern, device="PYTHON", **rk.inputs)
    var_vals = {v.name: int(rk.inputs[v.name]) for v in spec.vars}
    sizes = spec.buffer_sizes(var_vals)
    arrays = []
    for p, n in zip(spec.params, sizes):
        if p.writable:
            arrays.append(np.zeros(n, p.dtype.np))
        else:
            arrays.append(np.ascontiguousarray(from_numpy_values(np.asarray(rk.inputs[p.name]), p.dtype)))
    HostKernel(spec, MetalRenderer(), workdir=str(tmp_path)).run(arrays, [var_vals[v.name] for v in spec.vars])
    for p, got in zip(spec.user_params, arrays):
        if p.writable:
            got = bf16_to_f32(got) if p.dtype == bf16 else got
            _RK.assert_matches(got, np.asarray(ref[p.name]).reshape(-1), p.dtype, f"seed {seed} {p.name}\n{spec.src}")
