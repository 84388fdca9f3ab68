"""Kernels the fuzzer found (shrunk by devicekit.testing.shrink, printed by `to_python`), kept as regression
tests. Plugin bugs are xfail(strict=False) with the plugin named in the reason: they pass once fixed."""

from __future__ import annotations

import contextlib

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.errors import DeviceKitError
from devicekit.ir import dtypes
from devicekit.ir.ops import Ops
from devicekit.ir.uop import UOp
from devicekit.testing.devices import device_for
from devicekit.testing.random_kernels import assert_matches, random_kernel


def _check_on(dev, kernel, inputs):
    import devicekit as dk
    want = dk.run(kernel, device="PYTHON", **inputs)
    got = dk.run(kernel, device=dev, **inputs)
    for p in kernel.params:
        if p.writable:
            assert_matches(got[p.name], want[p.name], p.dtype, p.name)


@pytest.mark.parametrize("seed", [4, 22, 70, 144])
@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_float64_to_float16_casts_link_and_match(seed, pair):
    """Once `Symbols not found: [ __truncdfhf2 ]` on the llvm pair (fixed in the cpu plugin, 60c587a: double->half
    without libcalls). The kernels of these random_kernel seeds all cast float64 to float16."""
    rk = random_kernel(seed)
    assert any(u.op is Ops.CAST and u.dtype == dtypes.float16 and u.src[0].dtype == dtypes.float64
               for u in rk.kernel.uops())
    _check_on(device_for(f"CPU/{pair}"), rk.kernel, rk.inputs)


def test_float64_to_float16_rounding_edges():
    """Values at float16's limits and halfway points, cast from float64 (double rounding through float32 would get
    some of these wrong)."""
    k = ir.KernelBuilder("f64_to_f16")
    n = k.var("n", 1, 64)
    x = k.param("x", dtypes.float64, n)
    o = k.param("out", dtypes.float16, n, writable=True)
    i = k.range(n, "global")
    o[i] = x[i].cast(dtypes.float16)
    kern = k.build()
    h = float(np.finfo(np.float16).eps) / 2
    vals = np.array([0.0, -0.0, 1 + h, 1 + h + 2**-40, 1 + 3 * h, 65504.0, 65519.99, 65520.0, 6e-8, 2.9e-8, 3e-8,
                     -1e300, float("inf"), float("nan"), 1 / 3, 2049.0, 2051.0], dtype=np.float64)
    for pair in ("llvm", "c"):
        import devicekit as dk
        got = dk.run(kern, device=device_for(f"CPU/{pair}"), x=vals, n=vals.size)["out"]
        with np.errstate(over="ignore"):
            want = vals.astype(np.float16)
        np.testing.assert_array_equal(got, want, err_msg=pair)


# ---------------------------------------------------------------- CUDA renderer: native vs scalarized vectors
def _cuda_compile(kernel):
    import devicekit as dk
    try:
        t = dk.target("CUDA")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no CUDA compile toolchain here: {e}")
    r, c = t.pair(0)
    c.compile(r.render(kernel))


def _cast_native_to_scalarized():
    """fz14: int16x8 (16 bytes: a native CUDA vector) cast to uint64x8 (64 bytes: scalarized), one lane stored."""
    k = ir.KernelBuilder("fz14")
    n = k.var("n", 1, 4096)
    x = k.param("x", dtypes.int16, n * 8)
    o = k.param("out", dtypes.float64, n * 8, writable=True)
    i = k.range(n, "global")
    v = ir.vectorize(*[x[i * 8 + j] for j in range(8)])
    o[i * 8] = v.cast(dtypes.uint64.vec(8)).cast(dtypes.float64.vec(8)).gep(7)
    return k.build()


def _reduce_of_cast_vector():
    """fz17: a prod reduction of int64x4 (scalarized) cast to int16x4 (native): the accumulator update is
    rendered as a Python list (`acc0 = ['...', ...]`)."""
    k = ir.KernelBuilder("fz17")
    n = k.var("n", 1, 4096)
    m = k.var("m", 1, 64)
    x = k.param("x", dtypes.int64, n * m * 4)
    o = k.param("out", dtypes.int16, n, writable=True)
    i = k.range(n, "global")
    r = k.range(m, "reduce")
    v = ir.vectorize(x[(i * m + r) * 4], UOp.const(dtypes.int64, 0), UOp.const(dtypes.int64, 0),
                     UOp.const(dtypes.int64, 0))
    o[i] = v.cast(dtypes.int16.vec(4)).prod(r).gep(0)
    return k.build()


def _cast_uint8x8_to_float32x8():
    """fz55: uint8x8 (8 bytes, native) cast to float32x8 (32 bytes, scalarized)."""
    k = ir.KernelBuilder("fz55")
    n = k.var("n", 1, 4096)
    x = k.param("x", dtypes.uint8, n * 8)
    o = k.param("out", dtypes.float32, n * 8, writable=True)
    i = k.range(n, "global")
    v = ir.vectorize(*[x[i * 8 + j] for j in range(8)])
    o[i * 8] = v.cast(dtypes.float32.vec(8)).gep(7)
    return k.build()


@pytest.mark.parametrize("build", [_cast_native_to_scalarized, _cast_uint8x8_to_float32x8, _reduce_of_cast_vector],
                         ids=["int16x8-to-uint64x8", "uint8x8-to-float32x8", "reduce-of-cast-vector"])
def test_cuda_vector_casts_between_native_and_scalarized_compile(build):
    _cuda_compile(build())


@pytest.mark.parametrize("build", [_cast_native_to_scalarized, _cast_uint8x8_to_float32x8, _reduce_of_cast_vector],
                         ids=["int16x8-to-uint64x8", "uint8x8-to-float32x8", "reduce-of-cast-vector"])
@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_the_cuda_repros_run_right_on_cpu(build, pair):
    kern = build()
    rng = np.random.default_rng(0)
    inputs = {"n": 3}
    if any(v.name == "m" for v in kern.vars):
        inputs["m"] = 2
    p = kern.params[0]
    need = 3 * 8 if "m" not in inputs else 3 * 2 * 4
    inputs[p.name] = rng.integers(0, 100, need).astype(p.dtype.np)
    _check_on(device_for(f"CPU/{pair}"), kern, inputs)


def test_shrunk_source_still_builds():
    """The printed form (`to_python`) of a regression kernel rebuilds an equivalent kernel: the form we keep."""
    from devicekit.testing.shrink import PRELUDE, to_python
    kern = _reduce_of_cast_vector()
    ns: dict = {}
    exec(PRELUDE + to_python(kern, {"n": 1, "m": 1, "x": np.zeros(4, np.int64)}), ns)  # noqa: S102
    k2, inputs = ns["build"]()
    assert [p.name for p in k2.params] == ["x", "out"] and inputs["m"] == 1
    assert [u.op for u in k2.uops()].count(Ops.REDUCE) == 1


# ---------------------------------------------------------------- core lowering: max over an unroll range
def _max_over_unroll(dt):
    """fz10068 (and fz10187, fz11016, fz11555, fz11624, fz11638): a max reduction over an unroll range whose first
    lane is NaN. The reference skips NaNs (max(-inf, NaN) = -inf, docs/ir.md); lowering chained the lanes from lane
    0 instead of the identity, so the NaN propagated on every backend. Fixed in ir/passes.expand_unroll."""
    k = ir.KernelBuilder("max_unroll")
    n = k.var("n", 1, 4096)
    x = k.param("x", dtypes.int16, n * 2)
    o = k.param("out", dt, n, writable=True)
    i = k.range(n, "global")
    u = k.range(2, "unroll")
    o[i] = ir.sqrt(x[i * 2 + u].cast(dt)).max(u)
    return k.build()


@pytest.mark.parametrize("dt", [dtypes.float64, dtypes.float32, dtypes.float16, dtypes.bfloat16])
@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_max_over_unroll_range_skips_nan_lanes(dt, pair):
    import devicekit as dk
    kern = _max_over_unroll(dt)
    x = np.array([-420, 770, 9, -1, -4, -9], dtype=np.int16)  # sqrt: NaN first, NaN last, both NaN
    want = dk.run(kern, device="PYTHON", x=x, n=3)["out"]
    want64 = (want.astype(np.float64) if dt != dtypes.bfloat16 else want)
    assert np.isfinite(want64[0]) and want64[1] == 3 and np.isneginf(want64[2])
    _check_on(device_for(f"CPU/{pair}"), kern, {"x": x, "n": 3})


# ---------------------------------------------------------------- CPU C pair: signed overflow is UB in C
def _neg_of_shifted():
    """fz11691: max(-(int)1u, -(1 << 31)) in int32. -(INT_MIN) wraps to INT_MIN in the IR; in C it is undefined
    behaviour, and gcc -O2 folds the compare as if it could not overflow."""
    k = ir.KernelBuilder("fz11691")
    n = k.var("n", 1, 4096)
    a = k.param("a", dtypes.uint32, n)
    s = k.param("s", dtypes.int64, n)
    o = k.param("out", dtypes.int32, n, writable=True)
    i = k.range(n, "global")
    v = a[i]
    o[i] = ir.maximum(-v.cast(dtypes.int32), -(v.bitcast(dtypes.int32) << s[i].cast(dtypes.int32)))
    return k.build()


def _reduce_of_neg_shift():
    """fz11967: a max reduction of max(-(x << x), -x) for x = (int)bf16: the same signed overflow in a reduction."""
    k = ir.KernelBuilder("fz11967")
    n = k.var("n", 1, 4096)
    m = k.var("m", 1, 64)
    b = k.param("b", dtypes.bfloat16, n * m)
    o = k.param("out", dtypes.int32, n, writable=True)
    i = k.range(n, "global")
    r = k.range(m, "reduce")
    x = b[i * m + r].cast(dtypes.int32)
    o[i] = ir.maximum(-(x << x), -x).max(r)
    return k.build()


def _c_overflow_inputs(build):
    if build is _neg_of_shifted:
        return {"a": np.array([1, 1, 5], np.uint32), "s": np.array([-97, 31, 3], np.int64), "n": 3}
    return {"b": np.array([49199], np.uint16), "n": 1, "m": 1}  # bf16 bits of -2.1...: x = -2


@pytest.mark.parametrize("build", [_neg_of_shifted, _reduce_of_neg_shift], ids=["fz11691", "fz11967"])
@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_signed_overflow_wraps_on_cpu(build, pair):
    _check_on(device_for(f"CPU/{pair}"), build(), _c_overflow_inputs(build))


# ---------------------------------------------------------------- core: sin of large arguments
def _sin_kernel(dt):
    k = ir.KernelBuilder("big_sin")
    n = k.var("n", 1, 64)
    x = k.param("x", dt, n)
    o = k.param("out", dt, n, writable=True)
    i = k.range(n, "global")
    o[i] = ir.sin(x[i])
    return k.build()


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64, dtypes.float16])
@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_sin_of_large_arguments(dt, pair):
    """fz1867: sin(float32(2**64 - 3)). The float32 decomposition reduced with k * pi in float32, exact only for
    k < 2**12: sin(1e6) was off by 0.03, sin(1e9) returned 3.8e6. float32 now reduces in float64 where the target
    has it (ir/transcendental.sin(wide=True))."""
    xs = np.array([0.5, -3, 1e3, -1e4, 1e5, 1e6, -1e7, 1e8, 65504, np.inf, -np.inf, np.nan], np.float64)
    with np.errstate(over="ignore"):  # float16: past 65504 is inf, a value the check wants
        xs = np.append(xs, [1e9, -3e11] if dt == dtypes.float32 else []).astype(dt.np)
    _check_on(device_for(f"CPU/{pair}"), _sin_kernel(dt), {"x": xs, "n": xs.size})


@pytest.mark.xfail(strict=False, reason="core limit: ir/transcendental.sin reduces with Cody-Waite (3 parts of pi); "
                   "past ~1e8 (float64, 1e-9) or ~1e12 (float32) it needs Payne-Hanek reduction")
@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64])
def test_sin_of_huge_arguments(dt):
    xs = np.array([1e9, 1e13, 2.0**64, 1e30], np.float64).astype(dt.np)
    _check_on(device_for("CPU/llvm"), _sin_kernel(dt), {"x": xs, "n": xs.size})


# ---------------------------------------------------------------- core scheduling: a reduction of a constant
def _reduce_of_folded(op, dt):
    """fz50092 (and fz50367, fz50634): (a * 0).sum(r) on integers. Simplification folds the value to the constant
    0, so the accumulator update depended on no range and was hoisted out of the reduce loop, above the accumulator
    itself: every backend failed with KeyError(DEFINE_ACC). Fixed in ir/linearize._emit_reduce."""
    k = ir.KernelBuilder(f"fold_{op}")
    n, m = k.var("n", 1, 64), k.var("m", 1, 64)
    a = k.param("a", dt, n * m)
    o = k.param("out", dt, n, writable=True)
    i, r = k.range(n, "global"), k.range(m, "reduce")
    o[i] = getattr(a[i * m + r] * 0, op)(r) + 3
    return k.build()


@pytest.mark.parametrize("op", ["sum", "prod", "max"])
@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_reduction_of_a_value_folded_to_a_constant(op, pair):
    from devicekit.ir.linearize import lower
    kern = _reduce_of_folded(op, dtypes.uint16)
    dev = device_for(f"CPU/{pair}")
    lk = lower(kern, dev.renderer.capabilities)
    ops = [u.op for u in lk.uops]
    start = ops.index(Ops.DEFINE_ACC)
    assert Ops.ASSIGN in ops[start:] and ops.index(Ops.RANGE, start) < ops.index(Ops.ASSIGN, start)
    _check_on(dev, kern, {"a": np.arange(1, 7, dtype=np.uint16), "n": 3, "m": 2})


def test_reduction_of_a_folded_value_compiles_for_cuda():
    _cuda_compile(_reduce_of_folded("sum", dtypes.int32))


# ---------------------------------------------------------------- float16 mulacc: two roundings everywhere
def test_half_mulacc_stored_as_float32_rounds_twice():
    """rand3240: mulacc(h, h, h) in float16 (h = -133), stored as float32. The c pair fused it (17552, one rounding:
    gcc computes `_Float16` in float), the reference rounds twice (17568). The fuzzer still compares an output at
    the loosest float tolerance of the computation, but both CPU pairs now give the reference's bits."""
    import devicekit as dk
    from devicekit.testing.fuzz import _loosest_float
    k = ir.KernelBuilder("half_mulacc")
    n = k.var("n", 1, 64)
    x = k.param("x", dtypes.int32, n)
    o = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    h = x[i].cast(dtypes.float16)
    o[i] = ir.mulacc(h, h, h).cast(dtypes.float32)
    kern = k.build()
    assert _loosest_float(kern) == dtypes.float16
    xs = np.array([-133, 28, 7], np.int32)
    want = dk.run(kern, device="PYTHON", x=xs, n=3)["out"]
    assert want[0] == 17568.0
    for pair in ("llvm", "c"):
        got = dk.run(kern, device=device_for(f"CPU/{pair}"), x=xs, n=3)["out"]
        np.testing.assert_array_equal(got, want, err_msg=pair)


def _half_mulacc_then(tail):
    """mulacc(a, b, c) in float16 followed by a cancellation against the rounded product or by a sin: a fused
    (once-rounded) mulacc differs from the reference far beyond float16's tolerance."""
    k = ir.KernelBuilder(f"half_mulacc_{tail}")
    n = k.var("n", 1, 4096)
    a, b, c = (k.param(nm, dtypes.float16, n) for nm in ("a", "b", "c"))
    o = k.param("out", dtypes.float16, n, writable=True)
    i = k.range(n, "global")
    v = ir.mulacc(a[i], b[i], c[i])
    o[i] = v - a[i] * b[i] if tail == "cancel" else ir.sin(v * 64.0)
    return k.build()


def _half_triples(count=4096):
    rng = np.random.default_rng(10)
    a = (rng.standard_normal(count) * 60).astype(np.float16)
    b = (rng.standard_normal(count) * 60).astype(np.float16)
    c = (rng.standard_normal(count) * 3).astype(np.float16)
    return {"a": a, "b": b, "c": c, "n": count}


@pytest.mark.parametrize("tail", ["cancel", "sin"])
@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_half_mulacc_rounds_the_product_first(tail, pair):
    """The c pair rounded a float16 mulacc once; `(a*b + c) - a*b` then kept the product's rounding error (up to 8
    where the reference gives c rounded, or 0). Compared bit for bit with the reference for the cancellation (no
    transcendental in it) and at float16 tolerance after a sin."""
    import devicekit as dk
    kern, inputs = _half_mulacc_then(tail), _half_triples()
    want = dk.run(kern, device="PYTHON", **inputs)["out"]
    got = dk.run(kern, device=device_for(f"CPU/{pair}"), **inputs)["out"]
    if tail == "cancel":
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16), err_msg=pair)
    else:
        assert_matches(got, want, dtypes.float16, pair)


def test_half_mulacc_is_lowered_to_two_rounded_ops_for_every_renderer():
    """Where the rounding happens is decided in lowering (ir/passes.decompose), so C, llvm, CUDA and Metal render a
    float16 product rounded to half before the add; float32 mulacc stays one op where the renderer has it."""
    import devicekit as dk
    from devicekit.ir.linearize import lower
    kern = _half_mulacc_then("cancel")
    k32 = ir.KernelBuilder("f32_mulacc")
    n = k32.var("n", 1, 64)
    x = k32.param("x", dtypes.float32, n)
    o = k32.param("out", dtypes.float32, n, writable=True)
    i = k32.range(n, "global")
    o[i] = ir.mulacc(x[i], x[i], 1.0)
    kern32 = k32.build()
    renderers = [dk.target("CPU").pair(p)[0] for p in ("llvm", "c")]
    for kind in ("CUDA", "METAL"):
        with contextlib.suppress(DeviceKitError):  # a kind whose plugin is not installed here
            renderers.append(dk.target(kind).pair(0)[0])
    for r in renderers:
        ops = [(u.op, u.dtype.scalar()) for u in lower(kern, r.capabilities).uops]
        assert (Ops.MULACC, dtypes.float16) not in ops and (Ops.MUL, dtypes.float16) in ops, type(r).__name__
        if Ops.MULACC in r.capabilities.ops:
            assert Ops.MULACC in [u.op for u in lower(kern32, r.capabilities).uops], type(r).__name__


# ---------------------------------------------------------------- the generators: only defined kernels
def _const_values(u: UOp) -> list | None:
    if u.op is Ops.CONST:
        return [u.arg]
    if u.op is Ops.VECTORIZE and all(s.op is Ops.CONST for s in u.src):
        return [s.arg for s in u.src]
    return None


def _clamped(arg: UOp, lim: float = 2.0 ** 20) -> bool:
    """arg is ir.minimum(ir.maximum(x, -c), c) with |c| <= lim (`where(c < m, c, m)`, m = max(x, -c), as the
    builder spells it; float16 holds the bound as inf, below which every float16 value lies)."""
    def small(u: UOp) -> bool:
        vals = _const_values(u)
        return vals is not None and all(abs(v) <= lim or u.dtype.scalar() == dtypes.float16 for v in vals)
    if arg.op is not Ops.WHERE or arg.src[0].op is not Ops.CMPLT:
        return False
    c, m = arg.src[1], arg.src[2]
    return arg.src[0].src == (c, m) and small(c) and m.op is Ops.MAX and small(m.src[1])


def _undefined_uses(kernel) -> list[str]:
    """What a generated kernel may not contain (docs/ir.md): a bitcast from a float (NaN bits are unspecified) and a
    sin whose argument may leave |x| <= 2**20."""
    bad = []
    for u in kernel.uops():
        if u.op is Ops.BITCAST and not u.src[0].dtype.scalar().is_int:
            bad.append(f"bitcast {u.src[0].dtype} -> {u.dtype}")
        if u.op is Ops.SIN and not _clamped(u.src[0]):
            bad.append(f"sin of an unclamped {u.src[0].op.name}")
        rounded = {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.FDIV}
        if u.op is Ops.SIN and any(x.op in rounded for x in u.src[0].toposort()) and not _clamped(u.src[0], 4.0):
            bad.append("sin of a rounded result past |4| (base seed 3024406: the ulp became 0.005)")
    return bad


@pytest.mark.parametrize("profile", ["mixed", "base", "wide", "scalar", "ints", "floats", "memory", "shapes", "tiles"])
def test_every_fuzz_profile_generates_defined_kernels(profile):
    """The base profile (random_kernels.random_kernel) bitcast float results to ints (base seed 4474 bitcasts a
    transcendental's result: a NaN has no defined bits; seed 79 and others any float) and took sin of anything (an
    int cast to float, up to ~4.3e9 for uint32: seed 120 and others), where docs/ir.md promises nothing past 2**20.
    Every profile now clamps sin's argument to 2**20 and bitcasts only from integers; 300 seeds each checked."""
    from devicekit.testing.fuzzgen import make_case
    found = {s: b for s in range(300) if (b := _undefined_uses(make_case(s, profile).kernel))}
    assert not found, dict(list(found.items())[:5])


# ---------------------------------------------------------------- CPU c pair: gcc 12's SLP vectorizer
def _max_of_quotients(dt, lanes, shape):
    """fz2293 (wide profile), shrunk: max over 4 lanes of x // x, int8, x = 1. gcc 12.2 -O2 -fwrapv with AVX2 or
    AVX-512 gave -1 (uint8: 255) for 4 and 8 lanes of 8/16-bit ints; the C is right (gcc -O1, -march=x86-64 and
    -fno-tree-slp-vectorize give 1). Fixed by the c pair's table of known-bad compilers (cc_compiler.KNOWN_BAD)."""
    k = ir.KernelBuilder(f"max_of_quotients_{shape}")
    n = k.var("n", 1, 4096)
    x = k.param("x", dt, n * lanes)
    o = k.param("out", dt, n, writable=True)
    i = k.range(n, "global")
    if shape == "unroll":
        u = k.range(lanes, "unroll")
        v = x[i * lanes + u]
        o[i] = (v // v).max(u)
    else:  # the same chain of maxima written out lane by lane
        q = [x[i * lanes + j] // x[i * lanes + j] for j in range(lanes)]
        acc = q[0]
        for v in q[1:]:
            acc = ir.maximum(acc, v)
        o[i] = acc
    return k.build()


@pytest.mark.parametrize("shape", ["unroll", "chain"])
@pytest.mark.parametrize("lanes", [4, 8])
@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int16, dtypes.uint8])
@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_integer_max_of_lanes_on_every_accepted_compiler(dt, lanes, shape, pair):
    x = np.arange(1, 8 * lanes + 1).astype(dt.np)
    x[3] = 0  # x // 0 == 0 in one lane
    _check_on(device_for(f"CPU/{pair}"), _max_of_quotients(dt, lanes, shape), {"x": x, "n": 8})


# ---------------------------------------------------------------- CPU llvm pair: fast-math flags of a sum's terms
def _sum_of_products(dt, term):
    """Sums whose term is a product of computed values: (x * 1e30) * 0.0 must be NaN where x * 1e30 overflows
    (inf * 0), (x * z) * x must be 0 where z = 0 and x * x would overflow, -(x * 1e30) * 0.0 as the first."""
    k = ir.KernelBuilder(f"sum_{term}")
    n, m = k.var("n", 1, 64), k.var("m", 1, 64)
    a, c = k.param("a", dt, n * m), k.param("c", dt, n * m)
    o = k.param("out", dt, n, writable=True)
    i, r = k.range(n, "global"), k.range(m, "reduce")
    x, z = a[i * m + r], c[i * m + r]
    v = {"overflow_times_zero": (x * 1e30) * 0.0, "zero_times_big": (x * z) * x,
         "neg_overflow_times_zero": -(x * 1e30) * 0.0}[term]
    o[i] = v.sum(r)
    return k.build()


@pytest.mark.parametrize("term", ["overflow_times_zero", "zero_times_big", "neg_overflow_times_zero"])
@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64])
@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_sum_of_products_keeps_inf_times_zero(dt, term, pair):
    """The llvm pair (opt level >= 1) returned 0 for the first and NaN for the second: the product feeding the
    accumulator carried `reassoc contract`, so LLVM regrouped the term (x * (1e30 * 0.0)), and once contracted to an
    fma the code generator did the same with the add's flags. Now the product carries `contract` only, and only a
    product of loads, constants and casts contracts."""
    import devicekit as dk
    kern = _sum_of_products(dt, term)
    big = 1e30 if dt == dtypes.float32 else 1e300
    for m in (1, 3, 9):  # one term; the remainder loop; the split main loop
        inputs = {"a": np.full(3 * m, big, dt.np), "c": np.zeros(3 * m, dt.np), "n": 3, "m": m}
        want = dk.run(kern, device="PYTHON", **inputs)["out"]
        assert np.isnan(want).all() if term != "zero_times_big" else (want == 0).all()
        _check_on(device_for(f"CPU/{pair}"), kern, inputs)


@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_truncating_a_transcendental_result_is_not_generated_at_an_integer_edge(pair):
    """Wide seed 2000193 was trunc(exp2(log2(double(uint8 208)))): 207.99999999999997 in numpy, 208 on both pairs,
    a 1-ulp difference truncation makes a whole unit. The generator moves such values half a unit first."""
    from devicekit.testing.fuzzgen import make_case
    rk = make_case(2000193, "wide")
    _check_on(device_for(f"CPU/{pair}"), rk.kernel, rk.inputs)


def _record_between_loops_9133():
    """memory seed 9133, shrunk: a gated store whose index leaves out the outer loop `j` gets a bounds-check record
    over (i, j2) only; the scheduler closed loop `j` for it and reopened it for the next statement, which read y[j]
    again after the first statement's stores (both CPU pairs: y = [1, 1, 1], want [0, 0, 1])."""
    from devicekit.ir.uop import make_alu
    k = ir.KernelBuilder('mo9133')
    n = k.var('n', 1, 64)
    k.param('x', dtypes.int32, (n * 3))
    p_y = k.param('y', dtypes.int32, (n * 3), writable=True)
    k.param('z', dtypes.int32, (n * 3), writable=True)
    v1 = k.range(n, 'global')
    v2 = k.range(3, 'loop')
    v3 = k.range(3, 'loop')
    v4 = make_alu(Ops.MUL, (v1, UOp.const(dtypes.int64, 3),))
    v6 = make_alu(Ops.ADD, (v4, v2,))
    v8 = p_y[v6]
    v9 = make_alu(Ops.ADD, (v3, UOp.const(dtypes.int64, -1),))
    v10 = make_alu(Ops.ADD, (v4, v9,))
    v14 = make_alu(Ops.AND, ((v9 >= 0), (v9 < 3)))
    p_y.store(v10, v8, gate=v14)
    p_y.store(v6, UOp.const(dtypes.int32, 1))
    return k.build()


def _record_between_loops_9019():
    """memory seed 9019, shrunk: the same split with the record over (i, j) between two statements of loop j2; the
    second statement's z[j2] was read again after the first one's store to z."""
    from devicekit.ir.uop import make_alu
    k = ir.KernelBuilder('mo9019')
    n = k.var('n', 1, 64)
    k.param('x', dtypes.float32, (n * 3))
    p_y = k.param('y', dtypes.float32, (n * 3), writable=True)
    p_z = k.param('z', dtypes.float32, (n * 3), writable=True)
    v1 = k.range(n, 'global')
    v2 = k.range(3, 'loop')
    v3 = k.range(3, 'loop')
    v4 = make_alu(Ops.MUL, (v1, UOp.const(dtypes.int64, 3),))
    v5 = v2 + 2
    v12 = p_y.load(v4 + v5, gate=(v5 >= 0) & (v5 < 3), default=0.0)
    v16 = p_z[v4 + v3]
    p_z.store(v4 + 2, v12 + v16 + 1.0)
    p_y.store(v4, v16 - p_y[v4 + v2])
    return k.build()


@pytest.mark.parametrize("build", [_record_between_loops_9133, _record_between_loops_9019])
@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_a_bounds_record_does_not_split_the_loop_it_checks(build, pair):
    kern = build()
    assert kern.checked and any(p for p in kern.params if p.writable)
    rng = np.random.default_rng(0)
    for n in (1, 3):
        inputs = {"n": n, **{p.name: rng.integers(-20, 20, 3 * n).astype(p.dtype.np) for p in kern.params}}
        zeros = {"n": n, **{p.name: np.zeros(3 * n, p.dtype.np) for p in kern.params}}
        for case in (inputs, zeros):
            _check_on(device_for(f"CPU/{pair}"), kern, case)


def _load_between_merged_stores_3024495():
    """memory seed 3024495, shrunk: z[row + 3] is read between two stores that group_vectors merged into one vector
    store (y[row + 6], y[row + 7]); its statement gone, the load was read inside the next statement's loop, once per
    iteration, after that loop had stored to z[row + 3] (both CPU pairs: z[4:] = 2, want 1)."""
    from devicekit.ir.uop import make_alu
    k = ir.KernelBuilder('mo3024495')
    n = k.var('n', 1, 64)
    k.param('x', dtypes.float64, (n * 8))
    p_y = k.param('y', dtypes.float64, (n * 8), writable=True)
    p_z = k.param('z', dtypes.float64, (n * 8), writable=True)
    v1 = k.range(n, 'global')
    v2 = k.range(8, 'loop')
    v3 = make_alu(Ops.MUL, (v1, UOp.const(dtypes.int64, 8),))
    p_y.store(v3 + 6, UOp.const(dtypes.float64, 1.0))
    v9 = p_z[v3 + 3]
    p_y.store(v3 + 7, UOp.const(dtypes.float64, 0.0))
    v13 = v2 + 2
    p_z.store(v3 + v13, v9 + 1.0, gate=(v13 >= 0) & (v13 < 8))
    return k.build()


@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_a_load_between_merged_stores_is_read_once(pair):
    kern = _load_between_merged_stores_3024495()
    rng = np.random.default_rng(1)
    for n in (1, 2):
        inputs = {"n": n, **{p.name: rng.integers(-9, 9, 8 * n).astype(np.float64) for p in kern.params}}
        _check_on(device_for(f"CPU/{pair}"), kern, inputs)


def _inverse_sin_of_a_square_3097166():
    """Seed 3,097,166 (llvm campaign 3), shrunk: 1 / sin(x * x) for x = -807. sin(651249) = 0.0155: the range
    reduction subtracted k * (the parts of math.pi), which sum to pi rounded to 53 bits, so k * 1.2e-16 = 2.5e-11
    was left in the reduced argument (a relative error of 1.6e-9 in the result); the parts now sum to pi itself."""
    k = ir.KernelBuilder("rand3097166")
    n = k.var("n", 1, 4096)
    x, out = k.param("x", dtypes.int32, n), k.param("out", dtypes.float64, n, writable=True)
    i = k.range(n, "global")
    v = x[i].cast(dtypes.float64)
    out[i] = 1.0 / ir.sin(v * v)
    return k.build()


@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_float64_sin_reduces_by_pi_itself(pair):
    dev = device_for(f"CPU/{pair}")
    _check_on(dev, _inverse_sin_of_a_square_3097166(), {"x": np.array([-807, 1023, -1021, 5], np.int32), "n": 4})
    b = ir.KernelBuilder("sin64")
    n = b.var("n", 1, 64)
    a, o = b.param("a", dtypes.float64, n), b.param("o", dtypes.float64, n, writable=True)
    i = b.range(n, "global")
    o[i] = ir.sin(a[i])
    xs = np.array([651249.0, 1e5, 3e5, 6e5, 1e6, 2.0**20 - 1, -987654.321, 355.0], np.float64)
    got = dk.run(b.build(), dev, a=xs, n=len(xs))["o"]
    np.testing.assert_allclose(got, np.sin(xs), rtol=0, atol=4e-16)  # within 2 ulp of 1 up to 2**20 (was 3.6e-11)
