"""The Metal compiler, runtime and allocator on a real Mac (pyobjc). Skipped elsewhere, with the reason."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit_metal import env

warnings.filterwarnings("ignore", message=".*plugin.*")

_why = env.unavailable_reason()
pytestmark = [pytest.mark.macos, pytest.mark.gpu,
              pytest.mark.skipif(_why is not None, reason=f"needs macOS with Metal: {_why}")]


def _saxpy():
    k = ir.KernelBuilder("saxpy")
    n = k.var("n", 1, 1 << 24)
    x, y = k.param("x", dtypes.float32, n), k.param("y", dtypes.float32, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = x[i] * 2.0 + y[i]
    return k.build()


def test_device_available():
    import devicekit as dk
    dev = dk.device("METAL")
    assert str(dev.spec) == "METAL"


def test_inprocess_compile_and_run():
    import devicekit as dk
    from devicekit_metal.compiler import MAGIC_SOURCE
    dev = dk.device("METAL")
    n = 1000
    x, y = np.arange(n, dtype=np.float32), np.ones(n, dtype=np.float32)
    prog = dev.compile(_saxpy(), pair="metal")
    assert prog.compiled.lib.startswith(MAGIC_SOURCE)
    bx, by = dk.Buffer(dev, n, dtypes.float32).copyin(x), dk.Buffer(dev, n, dtypes.float32).copyin(y)
    bo = dk.Buffer(dev, n, dtypes.float32)
    t = prog.execute([bx, by, bo], [n], wait=True)
    assert t is not None and t >= 0
    np.testing.assert_allclose(bo.numpy(), x * 2 + y)


def test_xcrun_pair_when_present():
    import devicekit as dk
    from devicekit_metal.compiler import MAGIC_METALLIB
    dev = dk.device("METAL")
    if "xcrun" not in dev.pair_names:
        pytest.skip(f"Xcode's Metal toolchain is missing here: {dev.fallback_reason}")
    prog = dev.compile(_saxpy(), pair="xcrun")
    assert prog.compiled.lib.startswith(MAGIC_METALLIB)
    out = dk.run(_saxpy(), device=dev, x=np.ones(64, np.float32), y=np.ones(64, np.float32), n=64)
    np.testing.assert_allclose(out["out"], 3.0)


def test_matches_python_reference():
    import devicekit as dk
    k = ir.KernelBuilder("rowmax")
    m, n = k.var("m", 1, 4096), k.var("n", 1, 4096)
    a = k.param("a", dtypes.float32, m * n)
    o = k.param("o", dtypes.float32, m, writable=True)
    i, j = k.range(m, "global"), k.range(n, "reduce")
    o[i] = ir.exp2(a[i * n + j]).max(j)
    kern = k.build()
    a_np = np.random.default_rng(0).standard_normal(37 * 19).astype(np.float32)
    want = dk.run(kern, device="PYTHON", a=a_np, m=37, n=19)["o"]
    got = dk.run(kern, device="METAL", a=a_np, m=37, n=19)["o"]
    np.testing.assert_allclose(got, want, rtol=2e-6)


def test_compile_error_has_metal_log():
    import devicekit as dk
    from devicekit.render.program_spec import ProgramSpec
    from devicekit_metal.compiler import MetalCompiler
    spec = ProgramSpec(name="bad", src="kernel void bad(device float *x [[buffer(0)]]) { x[0] = y; }",
                       device="METAL", lang="metal", params=())
    with pytest.raises(dk.CompileError) as ei:
        MetalCompiler().compile(spec)
    assert ei.value.log


def test_buffer_views_and_zero_copy():
    import devicekit as dk
    dev = dk.device("METAL")
    alloc = dev.allocator
    h = alloc.alloc(64)
    alloc.copyin(h, memoryview(bytes(range(64))))
    v = alloc.offset(h, 16, 8)
    out = bytearray(16)
    alloc.copyout(memoryview(out), v)
    assert bytes(out) == bytes(range(8, 24))
    assert bytes(alloc.as_buffer(h, 4)) == bytes(range(4))
