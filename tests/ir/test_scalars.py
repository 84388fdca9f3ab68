"""k.scalar: per-launch scalar params of every dtype, against numpy on the reference, both CPU pairs and OpenCL
(PoCL); the uses refused at build, the values refused at launch, and one compile for every value."""

from __future__ import annotations

import math

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import KernelError, dtypes
from devicekit.ir.dtypes import bf16_to_f32, f32_to_bf16, round_float
from devicekit.testing.devices import device_for

DEVICES = ["PYTHON", "CPU/llvm", "CPU/c", "OPENCL"]
N = 7

# a value per dtype that a narrower type or a float conversion would change: both ends of the int types, a float64
# no float32 holds, a half that needs rounding, an int64 past 2**53, a uint64 past 2**63
VALUES = {"bool": True, "int8": -128, "int16": 32767, "int32": -2**31, "int64": 2**62 + 7, "uint8": 255,
          "uint16": 65535, "uint32": 2**32 - 1, "uint64": 2**64 - 3, "float16": 1.3, "bfloat16": -2.7,
          "float32": 0.1, "float64": 1 / 3}


def device(label: str):
    try:
        return device_for(label)
    except Exception as e:  # noqa: BLE001 - the kind is not installed or has no device here
        pytest.skip(f"{label}: {e}")


def supports(dev, dt) -> bool:
    """Whether the device computes in dt (natively or through the core's emulation: bfloat16 is emulated)."""
    caps = dev.renderer.capabilities if dev.renderer is not None else None
    return caps is None or dt in caps.dtypes or dt == dtypes.bfloat16


def axpb(dt):
    """o[i] = x[i] * s + s (bool: x[i] ^ s), with a scalar s of dtype dt."""
    k = ir.KernelBuilder(f"axpb_{dt.name}")
    n = k.var("n", 1, 64)
    s = k.scalar("s", dt)
    x, o = k.param("x", dt, n), k.param("o", dt, n, writable=True)
    i = k.range(n, "global")
    o[i] = x[i] ^ s if dt.is_bool else x[i] * s + s
    return k.build()


def numpy_axpb(dt, x: np.ndarray, s) -> np.ndarray:
    """The same in numpy: ints wrap, half rounds after each op, bfloat16 through float32 rounded after each op."""
    if dt.is_bool:
        return x ^ s
    if dt == dtypes.bfloat16:
        r = lambda v: bf16_to_f32(f32_to_bf16(np.asarray(v, np.float32)))
        sv = np.float32(round_float(s, dt))
        return r(r(r(x) * sv) + sv)  # the buffer holds x rounded to bfloat16
    with np.errstate(over="ignore"):
        sv = np.array(round_float(s, dt) if dt.is_float else s).astype(dt.np)
        return (x * sv + sv).astype(dt.np)


def inputs(dt) -> np.ndarray:
    rng = np.random.default_rng(3)
    if dt.is_bool:
        return rng.random(N) < 0.5
    if dt.is_float:
        return (rng.standard_normal(N) * 3).astype(np.float32 if dt == dtypes.bfloat16 else dt.np)
    return rng.integers(max(dt.min(), -1000), min(dt.max(), 1000), N, endpoint=True).astype(dt.np)


@pytest.mark.parametrize("label", DEVICES)
def test_every_dtype_vs_numpy(label):
    dev = device(label)
    ran = 0
    for dt in dtypes.all():
        if not supports(dev, dt):
            continue
        x = inputs(dt)
        want = numpy_axpb(dt, x.copy(), VALUES[dt.name])
        got = dk.run(axpb(dt), dev, x=x, n=N, s=VALUES[dt.name])["o"]
        np.testing.assert_array_equal(got, want, err_msg=f"{label} {dt.name}")
        ran += 1
    assert ran >= 11, f"{label} ran only {ran} dtypes"


def gemv_ab():
    """y = alpha * A x + beta * y0, PolyBench's alpha/beta as float64 scalars, with an int and a bool scalar too."""
    k = ir.KernelBuilder("gemv_ab")
    n = k.var("n", 1, 64)
    alpha, beta = k.scalar("alpha", dtypes.float64), k.scalar("beta", "float64")
    shift, neg = k.scalar("shift", np.int32), k.scalar("neg", dtypes.bool)
    a = k.param("A", dtypes.float64, shape=(n, n))
    x, y0 = k.param("x", dtypes.float64, n), k.param("y0", dtypes.float64, n)
    y = k.param("y", dtypes.float64, n, writable=True)
    i, j = k.range(n, "global"), k.range(n, "reduce")
    v = alpha * (a[i, j] * x[j]).sum(j) + beta * y0[i] + shift.cast(dtypes.float64)
    y[i] = ir.where(neg, -v, v)
    return k.build()


@pytest.mark.parametrize("label", DEVICES)
def test_alpha_beta_one_compile_for_every_value(label, tmp_path):
    """Three launches with other values, the kernel built anew each time: one compile (a cache miss, then hits)."""
    from devicekit.compile import CompileCache
    dev = device(label)
    cache = CompileCache(tmp_path, disk=False)
    old, dev.compiler.cache = dev.compiler.cache, cache
    try:
        rng = np.random.default_rng(0)
        n = 9
        a, x, y0 = rng.standard_normal((n, n)), rng.standard_normal(n), rng.standard_normal(n)
        for alpha, beta, shift, neg in ((1.5, 1.2, 0, False), (-0.25, 0.0, -3, True), (2, 1, 7, False)):
            kern = gemv_ab()
            prog = dev.compiler.compile(dev.renderer.render(kern))
            assert prog is not None
            got = dk.run(kern, dev, A=a, x=x, y0=y0, n=n, alpha=alpha, beta=beta, shift=shift, neg=neg)["y"]
            want = alpha * (a @ x) + beta * y0 + shift
            np.testing.assert_allclose(got, -want if neg else want, rtol=1e-12, atol=1e-12)
        assert cache.stats["misses"] == 1 and cache.stats["memory_hits"] >= 2, cache.stats
    finally:
        dev.compiler.cache = old


def test_value_is_not_in_the_source_and_dtype_is_in_the_key():
    src = dk.device("CPU").renderer.render(gemv_ab()).src
    assert "1.5" not in src and "dku_alpha" in src

    def one(dt):
        k = ir.KernelBuilder("k")
        s = k.scalar("s", dt)
        o = k.param("o", dtypes.float32, 1, writable=True)
        o[0] = s.cast(dtypes.float32)
        return k.build()
    assert one(dtypes.float32).key != one(dtypes.float64).key
    assert one(dtypes.int8).key == one(dtypes.int8).key


def test_launch_rounds_once_to_the_scalar_dtype():
    """float64 -> bfloat16 rounds once: 1 + 2**-8 + 2**-30 is just past the midpoint of 1 and 1 + 2**-7, so it
    rounds up; through float32 it would become the midpoint and round to even (1.0). Half and float32 likewise."""
    x = 1 + 2**-8 + 2**-30
    assert round_float(x, dtypes.bfloat16) == 1 + 2**-7
    assert float(bf16_to_f32(f32_to_bf16(np.array([x], np.float32)))[0]) == 1.0  # the double rounding avoided
    for label in ("PYTHON", "CPU/llvm", "CPU/c"):
        dev = device(label)
        for dt, v in ((dtypes.bfloat16, x), (dtypes.float16, 1 + 2**-11 + 2**-40), (dtypes.float32, 0.1)):
            k = ir.KernelBuilder(f"widen_{dt.name}")
            s = k.scalar("s", dt)
            o = k.param("o", dtypes.float64, 1, writable=True)
            o[0] = s.cast(dtypes.float64)
            got = dk.run(k.build(), dev, s=v)["o"][0]
            assert got == round_float(v, dt) != v, (label, dt)


# ---- refused at build ------------------------------------------------------------------------------------------------

def _builder():
    k = ir.KernelBuilder("bad")
    n = k.var("n", 1, 64)
    return k, n, k.scalar("alpha", dtypes.float64), k.scalar("m", dtypes.int32)


@pytest.mark.parametrize("use, words", [
    (lambda k, n, a, m: k.param("x", dtypes.float32, n).load(m), "m (int32) used in an index into x"),
    (lambda k, n, a, m: k.param("x", dtypes.float32, n)[(m.cast(dtypes.index) + 1) % n], "used in an index into x"),
    (lambda k, n, a, m: k.param("x", dtypes.float32, shape=(n, n))[0, m], "used in index 1 into x"),
    (lambda k, n, a, m: k.param("x", dtypes.float32, n)[a], "alpha (float64) used in an index into x"),
    (lambda k, n, a, m: k.param("x", dtypes.float32, n).get(m), "used in an index into x"),
    (lambda k, n, a, m: k.range(m, "loop"), "m (int32) used as a range's end"),
    (lambda k, n, a, m: k.range(m, n, "loop"), "as a range's start"),
    (lambda k, n, a, m: k.range(a, "global"), "alpha (float64) used as a range's end"),
    (lambda k, n, a, m: k.param("x", dtypes.float32, m), "used in the size of param x"),
    (lambda k, n, a, m: k.param("x", dtypes.float32, shape=(n, m.cast(dtypes.index))), "in the size of param x"),
    (lambda k, n, a, m: k.var("kk", 0, m), "used in the hi bound of var kk"),
])
def test_scalar_is_never_an_index_size_or_bound(use, words):
    k, n, a, m = _builder()
    with pytest.raises(KernelError, match="a k.scalar is a value for expressions") as e:
        use(k, n, a, m)
    assert words in str(e.value)
    if "m (int32)" in words:
        assert "k.var('m', lo, hi)" in str(e.value)  # an int that indexes is a var


def test_verifier_refuses_a_scalar_index_in_a_graph_built_by_hand():
    from devicekit.ir.builder import Kernel
    from devicekit.ir.ops import Ops
    from devicekit.ir.uop import UOp
    good = axpb(dtypes.int64)
    s = next(u for u in good.var_uops if u.op is Ops.SCALAR)
    st = good.sink.src[0]
    ix = st.src[0]
    bad_ix = ix.replace(src=(ix.src[0], s))
    sink = good.sink.replace(src=(st.replace(src=(bad_ix, *st.src[1:])),))
    with pytest.raises(KernelError, match="scalar s .int64. used in an index into o"):
        Kernel(good.name, sink, good.params, good.vars, good.param_uops, good.var_uops)
    other = UOp(Ops.SCALAR, dtypes.float32, (), "t")
    with pytest.raises(KernelError, match="scalar t belongs to another kernel"):
        Kernel(good.name, sink.replace(src=(st.replace(src=(ix, other.cast(dtypes.int64))),)), good.params,
               good.vars, good.param_uops, good.var_uops)


def test_builder_refuses_bad_declarations():
    k = ir.KernelBuilder("decl")
    k.scalar("a", dtypes.float32)
    with pytest.raises(ValueError, match="already used"):
        k.scalar("a", dtypes.float64)
    with pytest.raises(TypeError, match="scalar b: dtype must be a scalar dtype"):
        k.scalar("b", dtypes.float32.vec(4))
    with pytest.raises(TypeError, match="scalar c"):
        k.scalar("c", "complex128")


# ---- refused at launch -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt, value, err, words", [
    (dtypes.int32, 1.5, TypeError, "scalar s (int32) takes an int, got a float"),
    (dtypes.int32, np.float64(2.0), TypeError, "takes an int"),
    (dtypes.int8, 128, ValueError, "128 is outside an int8's range -128..127"),
    (dtypes.uint16, -1, ValueError, "outside a uint16's range 0..65535"),
    (dtypes.uint64, 2**64, ValueError, "outside a uint64's range"),
    (dtypes.int64, True, TypeError, "takes an int, got a bool"),
    (dtypes.float16, 70000.0, ValueError, "70000.0 is outside a float16's range"),
    (dtypes.float32, 1e39, ValueError, "is outside a float32's range"),
    (dtypes.float64, 10**400, ValueError, "is outside a float64's range"),
    (dtypes.float64, "1.5", TypeError, "takes a number, got a str"),
    (dtypes.float64, None, TypeError, "takes a number, got None"),
    (dtypes.float32, False, TypeError, "takes a number, got a bool"),
    (dtypes.bool, 1, TypeError, "scalar s (bool) takes a bool"),
], ids=lambda v: getattr(v, "name", None) or (v.__name__ if isinstance(v, type) else repr(v)[:12]))
@pytest.mark.parametrize("label", ["PYTHON", "CPU/llvm"])
def test_wrong_values_are_refused_naming_the_scalar(label, dt, value, err, words):
    kern = axpb(dt)
    x = inputs(dt)
    with pytest.raises(err, match="scalar s") as e:
        dk.run(kern, device(label), x=x, n=N, s=value)
    assert words in str(e.value)
    prog = device(label).compile(kern)  # Program.execute checks the same
    from devicekit.memory import Buffer
    bx = Buffer(prog.device, N, dt).copyin(x)
    bo = Buffer(prog.device, N, dt)
    with pytest.raises(err, match="scalar s"):
        prog.execute([bx, bo], [N, value])


def test_missing_scalar_and_infinity():
    kern = axpb(dtypes.float32)
    with pytest.raises(TypeError, match=r"missing scalar\(s\) s \(float32\)"):
        dk.run(kern, "CPU", x=inputs(dtypes.float32), n=N)
    prog = dk.device("CPU").compile(kern)
    from devicekit.memory import Buffer
    bufs = [Buffer(prog.device, N, dtypes.float32) for _ in range(2)]
    with pytest.raises(TypeError, match=r"expected 2 vars \(n, s\), got 1"):
        prog.execute(bufs, [N])
    got = dk.run(kern, "CPU", x=np.ones(N, np.float32), n=N, s=math.inf)["o"]  # inf itself is a float32 value
    assert np.isinf(got).all()
    got = dk.run(kern, "CPU", x=np.ones(N, np.float32), n=N, s=np.float32(2))["o"]
    assert (got == 4).all()


def test_to_python_prints_scalars():
    """The fuzzer's kernel printer rebuilds a kernel with scalars (and their values) through the public API."""
    from devicekit.testing.shrink import PRELUDE, to_python
    kern = gemv_ab()
    vals = {"A": np.ones(4), "x": np.ones(2), "y0": np.zeros(2), "n": 2, "alpha": 1.5, "beta": -0.5, "shift": 3,
            "neg": True}
    src = to_python(kern, vals)
    assert "k.scalar('alpha', dtypes.float64)" in src and "k.scalar('neg', dtypes.bool)" in src
    ns: dict = {}
    exec(PRELUDE + src, ns)  # noqa: S102 - the printed source is ours
    k2, inputs2 = ns["build"]()
    assert k2.key == kern.key and inputs2["alpha"] == 1.5 and inputs2["neg"] is True


def test_scalars_in_named_launches_and_plans():
    """A scalar binds by name in a named launch and may be a plan var: each `Plan.run` value is checked and rounded
    like an execute's (a wrong kind is refused naming the scalar), with one compile for all."""
    dev = dk.device("CPU")
    prog = dev.compile(gemv_ab())
    n = 5
    rng = np.random.default_rng(4)
    a, x, y0 = rng.standard_normal((n, n)), rng.standard_normal(n), rng.standard_normal(n)
    ba, bx, by0 = (dk.Buffer(dev, v.size, dtypes.float64).copyin(v.reshape(-1)) for v in (a, x, y0))
    by = dk.Buffer(dev, n, dtypes.float64)
    prog(A=ba, x=bx, y0=by0, y=by, n=n, alpha=1.5, beta=0.5, shift=2, neg=False, wait=True)
    np.testing.assert_allclose(by.numpy(), 1.5 * (a @ x) + 0.5 * y0 + 2, rtol=1e-12)
    plan = dk.Plan(dev).add(prog, A=ba, x=bx, y0=by0, y=by, n=n, alpha="al", beta=0.0, shift=0, neg="flip")
    for al, flip in ((2.0, False), (-0.25, True), (3, False)):
        plan.run(al=al, flip=flip, wait=True)
        want = al * (a @ x)
        np.testing.assert_allclose(by.numpy(), -want if flip else want, rtol=1e-12)
    with pytest.raises(TypeError, match=r"scalar neg \(bool\) takes a bool"):
        plan.run(al=1.0, flip=1)
