"""Conformance: what a runtime's Program owes the core (docs/writing-a-plugin.md, section 8), each a row of
docs/conformance.md's contract table: `wait=True` returns the kernel's seconds; bytes the runtime cannot load are
refused by the factory, at load (so `Device` can discard a damaged cache entry and recompile), never at a launch and
never by a crash; results keep IEEE semantics (no contraction of a*b-c into an fma, NaN stays NaN)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from devicekit import kernels

pytestmark = pytest.mark.devicekit_conformance

N = 1 << 16


def _fma_buffers(dev, n: int = N):
    import devicekit as dk
    from devicekit.ir.dtypes import dtypes
    rng = np.random.default_rng(7)
    host = [rng.standard_normal(n).astype(np.float32) for _ in range(3)]
    return host, [dk.Buffer(dev, n, dtypes.float32).copyin(x) for x in host] + [dk.Buffer(dev, n, dtypes.float32)]


def test_wait_returns_the_kernels_seconds(dk_device):
    """A positive, finite float no larger than the call itself took (a 64K-element launch takes microseconds);
    0.0 or None would make every timing built on it (dk.search, bench) meaningless."""
    prog = dk_device.compile(kernels.elementwise("a * b + c", name="dk_conf_timing"))
    host, bufs = _fma_buffers(dk_device)
    for _ in range(3):
        t0 = time.perf_counter()
        s = prog.execute(bufs, [N], wait=True)
        wall = time.perf_counter() - t0
        assert isinstance(s, float) and math.isfinite(s), f"execute(wait=True) returned {s!r}, not seconds"
        assert 0.0 < s <= wall + 1e-3, f"execute(wait=True) returned {s!r} s for a call that took {wall:.6f} s"
    np.testing.assert_allclose(bufs[3].numpy(), host[0] * host[1] + host[2], rtol=1e-5, atol=1e-6)


def test_a_program_leaves_the_cores_state_to_the_core(dk_device):
    """`Program.CORE_STATE`: the names under which the core keeps a Program's signature, launch cache, bounds-check
    records and generated front. A backend's Program that uses one for its own state (a class attribute, or set in
    its `__init__`) breaks launches the core makes later: the CPU pool's chunk records, first named `_records`, took
    the place of the bounds-check record pool and every checked launch failed. `execute` may be overridden only by a
    class (the core installs its front on the instance)."""
    from devicekit.runtime import Program
    prog = dk_device.compile(kernels.elementwise("a * b + c", name="dk_conf_state"))
    for name in Program.CORE_STATE:
        owners = [c.__name__ for c in type(prog).__mro__ if c is not Program and name in vars(c) and name != "execute"]
        assert not owners, f"{type(prog).__name__}: {name!r} is the core's per-program state; {owners} define it"
    fresh = dk_device.runtime(prog.compiled) if hasattr(dk_device, "runtime") else None
    if fresh is not None:
        taken = sorted(set(vars(fresh)) & set(Program.CORE_STATE))
        assert not taken, f"{type(fresh).__name__}.__init__ sets {taken}: the core's per-program state"
    host, bufs = _fma_buffers(dk_device, 1024)
    for _ in range(3):  # and the core's state works on it: launches, repeats through the launch cache
        prog.execute(bufs, [1024], wait=True)
    np.testing.assert_allclose(bufs[3].numpy(), host[0] * host[1] + host[2], rtol=1e-5, atol=1e-6)


def _damaged(lib: bytes, how: str) -> bytes:
    if how == "empty":
        return b""
    if how == "truncated":
        return lib[: max(1, len(lib) // 3)]
    return bytes((i * 37 + 11) % 256 for i in range(max(len(lib), 64)))  # garbage


@pytest.mark.parametrize("how", ["empty", "garbage"])
def test_bytes_it_cannot_load_are_refused_at_load(dk_device, how):
    """The runtime factory gets untrusted bytes (`trusted=False`, as from a file): it raises at load, or (a runtime
    that does not load the bytes at all, e.g. PYTHON's interpreter) the Program it returns computes the right thing.
    A factory that accepts them and fails at the first launch (or crashes there) fails this."""
    import devicekit as dk
    from devicekit.compile.compiler import CompiledSpec
    renderer, compiler = dk_device.compilers[0]
    good = compiler.compile(renderer.render(kernels.elementwise("a * b + c", name="dk_conf_bytes")))
    bad = CompiledSpec(good.spec, _damaged(good.lib, how), good.compiler_id)
    assert bad.trusted is not True
    try:
        prog = dk_device.runtime(bad)
    except Exception:  # noqa: BLE001 - any exception at load is the contract (a crash is not)
        return
    a, b, c = (np.arange(1, 9, dtype=np.float32) * s for s in (1.5, -2.0, 0.25))
    got = dk.run(prog, dk_device, a=a, b=b, c=c, n=8)["out"]
    np.testing.assert_array_equal(got, a * b + c, err_msg=f"{how} bytes were accepted and compute garbage")


def test_ieee_semantics(dk_device):
    """c = float32(a*b) exactly, so a*b - c is 0 without contraction (an fma gives a*b's rounding error); a NaN input
    stays NaN and `x != x` sees it; inf - inf is NaN. Exact, not within a tolerance: fast-math breaks each."""
    import devicekit as dk
    from devicekit import ir
    from devicekit.ir.dtypes import dtypes
    k = ir.KernelBuilder("dk_conf_ieee")
    n = k.var("n", 1, 1 << 20)
    a, b, c, x = (k.param(p, dtypes.float32, n) for p in ("a", "b", "c", "x"))
    d = k.param("d", dtypes.float32, n, writable=True)
    isnan = k.param("isnan", dtypes.int32, n, writable=True)
    y = k.param("y", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    d[i] = a[i] * b[i] - c[i]
    isnan[i] = ir.where(x[i].ne(x[i]), 1, 0)
    y[i] = x[i] - x[i]
    rng = np.random.default_rng(11)
    av = (1 + rng.integers(1, 1 << 12, 64) * 2.0**-12).astype(np.float32)
    bv = (1 + rng.integers(1, 1 << 12, 64) * 2.0**-12).astype(np.float32)
    cv = av * bv  # rounded to float32: a*b - c is exactly 0 in IEEE arithmetic without contraction
    assert (av.astype(np.float64) * bv != cv).any()  # some products are inexact, so an fma would show
    xv = np.array([np.nan, 1.0, np.inf, -np.inf] * 16, np.float32)
    for pair in dk_device.pair_names:
        got = dk.run(k.build(), dk_device, a=av, b=bv, c=cv, x=xv, n=64, pair=pair)
        np.testing.assert_array_equal(got["d"], np.zeros(64, np.float32), err_msg=f"[{pair}] a*b-c was contracted")
        np.testing.assert_array_equal(got["isnan"], np.isnan(xv).astype(np.int32), err_msg=f"[{pair}] x != x")
        np.testing.assert_array_equal(np.isnan(got["y"]), ~np.isfinite(xv), err_msg=f"[{pair}] x - x for NaN/inf")


_TRUNCATED = """
import sys, devicekit as dk
from devicekit import kernels
from devicekit.compile.compiler import CompiledSpec
try:
    dev = dk.device(sys.argv[1])
except Exception as e:  # a device set up in the parent only (a fake driver): nothing to load here
    print("unavailable:", type(e).__name__, e)
    sys.exit(3)
r, c = dev.compilers[0]
good = c.compile(r.render(kernels.elementwise("a * b + c", name="dk_conf_truncated")))
try:
    dev.runtime(CompiledSpec(good.spec, good.lib[: max(1, len(good.lib) // 3)], good.compiler_id))
except Exception as e:
    print("refused:", type(e).__name__)
else:
    print("accepted")
"""


def test_truncated_bytes_never_crash_the_loader(dk_device, dk_spec, dk_info):
    """A third of a valid object (a cache file cut short): refused at load or accepted, never a crash. Run in a
    fresh interpreter, so a loader that crashes fails this check instead of ending the kit."""
    import os
    import subprocess
    import sys

    if dk_info.distribution is None:
        pytest.skip(f"plugin {dk_info.plugin!r} was registered in-process: a fresh process does not have it")
    env = {k: v for k, v in os.environ.items() if k != "DEVICEKIT_TRACE_PLUGINS"}
    p = subprocess.run([sys.executable, "-c", _TRUNCATED, str(dk_spec)], capture_output=True, text=True,
                       timeout=120, env=env, check=False)
    if p.returncode == 3 and p.stdout.startswith("unavailable:"):
        pytest.skip(f"{dk_spec} cannot be opened in a fresh interpreter ({p.stdout.strip()[13:][:300]})")
    assert p.returncode == 0, f"loading truncated bytes ended the process (exit {p.returncode}): {p.stderr[-1500:]}"

