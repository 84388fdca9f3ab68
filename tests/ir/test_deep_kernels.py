"""Deep kernels (issue: a chain of 164 steps on PYTHON, 247 on CPU, an unroll of 1,000 or an expression nested 2,000
deep ended in a raw RecursionError): every walk over a kernel graph is iterative, so depth is not a limit; where one
is needed (nested reductions, the reference's array axes) it is a KernelError that names it.

The 100,000-step sizes run with DEVICEKIT_SLOW=1 (docs/reliability.md has their time and memory)."""

from __future__ import annotations

import pickle
import sys

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir, settings
from devicekit.ir import dtypes
from devicekit.ir.uop import KernelError

SLOW = settings.get("DEVICEKIT_SLOW")


def chain(n: int, dt=dtypes.float32) -> ir.Kernel:
    """out[i] = f(f(...f(x[i])...)): n steps, each one op (the graph is n nodes deep)."""
    k = ir.KernelBuilder("chain")
    x = k.param("x", dt, 16)
    y = k.param("y", dt, 16, writable=True)
    i = k.range(16, "global")
    v = x[i]
    for j in range(n):
        v = (v * 3 + 1 if j % 2 else v ^ j) if dt.is_int else (v * 0.5 + 0.25 if j % 2 else v + 1.0)
    y[i] = v
    return k.build()


def nest(n: int) -> ir.Kernel:
    """An expression nested n deep through selects, compares and loads of the input."""
    k = ir.KernelBuilder("nest")
    x = k.param("x", dtypes.int32, 16)
    y = k.param("y", dtypes.int32, 16, writable=True)
    i = k.range(16, "global")
    v = x[i]
    for j in range(n):
        v = ir.where(v < x[(i + j) % 16], v + 1, v - 1) if j % 3 == 0 else (v ^ j)
    y[i] = v
    return k.build()


def unroll_sum(n: int) -> ir.Kernel:
    k = ir.KernelBuilder("unroll_sum")
    x = k.param("x", dtypes.int64, 16)
    y = k.param("y", dtypes.int64, 1, writable=True)
    r = k.range(n, "unroll")
    y[0] = (x[r % 16] * 2).sum(r)
    return k.build()


def _x(dt) -> np.ndarray:
    return (np.arange(16) % 7 - 3).astype(dt.np)


def _agree(kern: ir.Kernel, dt, device: str = "CPU", **kw) -> None:
    inputs = {"x": _x(dt)}
    want = dk.run(kern, "PYTHON", **inputs)
    got = dk.run(kern, device, **inputs, **kw)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_recursion_limit_is_far_below_the_depths_tested():
    """The depths below exceed what any recursive walk could reach under the default limit."""
    assert sys.getrecursionlimit() <= 10_000


def _nest_numpy(n: int) -> np.ndarray:
    x = _x(dtypes.int32)
    v = x.copy()
    for j in range(n):
        v = np.where(v < np.roll(x, -(j % 16)), v + 1, v - 1).astype(np.int32) if j % 3 == 0 else v ^ np.int32(j)
    return v


def test_10000_deep_nesting_runs_on_the_reference():
    """The builder, the verifier and the reference walk it (lowering and compiling it on both CPU pairs is the
    DEVICEKIT_SLOW test's: about a minute; 2,000 deep on both pairs is below)."""
    out = dk.run(nest(10_000), "PYTHON", x=_x(dtypes.int32))
    np.testing.assert_array_equal(out["y"], _nest_numpy(10_000))


@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_2000_deep_kernels_on_each_cpu_pair(pair):
    """Lowering, the optimizer and both renderers walk them; the C one names an inlined expression past
    MAX_INLINE_DEPTH (a 2,000-deep line of parentheses was past clang's bracket limit)."""
    _agree(chain(2_000, dtypes.int32), dtypes.int32, pair=pair)
    _agree(nest(2_000), dtypes.int32, pair=pair)


def test_20000_step_chain_on_the_reference():
    kern = chain(20_000)
    out = dk.run(kern, "PYTHON", x=_x(dtypes.float32))
    want = _x(dtypes.float32)
    for j in range(20_000):
        want = (want * np.float32(0.5) + np.float32(0.25)) if j % 2 else (want + np.float32(1.0))
    np.testing.assert_array_equal(out["y"], want)


def test_unroll_of_1500_lanes():
    _agree(unroll_sum(1_500), dtypes.int64)


def test_a_deep_graph_hashes_and_pickles():
    """Kernel.key hashed sources recursively, and a UOp pickled its sources as nested tuples."""
    kern = chain(10_000, dtypes.int32)
    assert len(kern.key) == 32
    assert pickle.loads(pickle.dumps(kern.sink)) is kern.sink


def test_reductions_nested_too_deep_are_refused_by_name():
    k = ir.KernelBuilder("nested")
    x = k.param("x", dtypes.int32, 8)
    y = k.param("y", dtypes.int32, 4, writable=True)
    i = k.range(4, "global")
    rs = [k.range(2, "reduce") for _ in range(70)]
    v = x[(i + rs[-1]) % 8]
    for r in reversed(rs):
        v = (v + x[r % 8]).max(r)
    y[i] = v
    with pytest.raises(KernelError, match="reductions nested 65 deep: devicekit lowers at most 64"):
        k.build()


def test_the_reference_says_how_many_ranges_it_runs():
    k = ir.KernelBuilder("many")
    x = k.param("x", dtypes.int32, 8)
    y = k.param("y", dtypes.int32, 4, writable=True)
    i = k.range(4, "global")
    rs = [k.range(2, "reduce") for _ in range(40)]
    v = x[(i + rs[-1]) % 8]
    for r in reversed(rs):
        v = (v + x[r % 8]).max(r)
    y[i] = v
    kern = k.build()
    with pytest.raises(KernelError, match="the PYTHON reference gives each range an array axis"):
        dk.run(kern, "PYTHON", x=np.arange(8, dtype=np.int32))
    a = dk.run(kern, "CPU", x=np.arange(8, dtype=np.int32), pair="llvm")  # the devices run it, alike
    b = dk.run(kern, "CPU", x=np.arange(8, dtype=np.int32), pair="c")
    np.testing.assert_array_equal(a["y"], b["y"])


@pytest.mark.skipif(not SLOW, reason="DEVICEKIT_SLOW=1: 100,000-step kernels")
@pytest.mark.parametrize("build, pairs", [
    (lambda: chain(100_000, dtypes.int32), ("llvm",)),  # clang -O2 on 100,000 statements runs past its 300 s limit
    (lambda: nest(10_000), ("llvm", "c")),
    (lambda: chain(10_000, dtypes.int32), ("llvm", "c")),
    (lambda: unroll_sum(10_000), ("llvm", "c")),
])
def test_deep_kernels_compile_and_agree(build, pairs):
    kern = build()
    for pair in pairs:
        _agree(kern, kern.params[0].dtype, pair=pair)


@pytest.mark.skipif(not SLOW, reason="DEVICEKIT_SLOW=1: 100,000-step kernels")
def test_100000_deep_nesting_lowers_for_both_pairs():
    """devicekit's part of a 100,000-deep kernel (build, verify, reference, lowering, both renderers); the C
    compiler's own time on it is not ours to bound."""
    kern = nest(100_000)
    dk.run(kern, "PYTHON", x=_x(dtypes.int32))
    dev = dk.device("CPU")
    for renderer, _ in dev.compilers:
        assert renderer.render(kern).src


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.int32, dtypes.int64])
def test_minus_a_negative_constant_on_the_c_pair(dt):
    """Found by the deep fuzz profile (seed 4): `x - -2.0` was rendered `(x--2.0)`, which C reads as a decrement."""
    k = ir.KernelBuilder("minus_negative")
    x = k.param("x", dt, 16)
    y = k.param("y", dt, 16, writable=True)
    i = k.range(16, "global")
    y[i] = (x[i] - ir.UOp.const(dt, -2 if dt.is_int else -2.0)) * 3
    _agree(k.build(), dt, pair="c")
