"""The design's device flow end to end on the real devices of this machine (the PYTHON reference device always;
CPU and others when available): KernelBuilder -> render -> compile (cached) -> runtime -> Buffers -> numpy."""

import os
import subprocess
import sys
from pathlib import Path

import devicekit as dk
import numpy as np
import pytest
from devicekit.memory import Buffer

ROOT = Path(__file__).resolve().parents[1]


def saxpy(name: str = "saxpy"):
    from devicekit import ir
    from devicekit.ir import dtypes
    k = ir.KernelBuilder(name)
    n = k.var("n", lo=1, hi=2**31 - 1)
    x = k.param("x", dtypes.float32, size=n)
    y = k.param("y", dtypes.float32, size=n)
    out = k.param("out", dtypes.float32, size=n, writable=True)
    i = k.range(n, kind="global")
    out[i] = x[i] * 2.0 + y[i]
    return k.build()


def available():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from devicekit.registry import reset_registry
        reset_registry()
        return [d.spec for d in dk.devices() if d.available and d.kind in ("PYTHON", "CPU", "CUDA", "METAL")]


@pytest.fixture(scope="module")
def devices():
    devs = available()
    if "PYTHON" not in devs:
        pytest.skip("the PYTHON reference device is not available (core/devicekit/reference)")
    return devs


def test_run_saxpy_on_every_available_device(devices):
    kernel = saxpy()
    n = 1000
    x = np.linspace(-1, 1, n, dtype=np.float32)
    y = np.full(n, 0.25, np.float32)
    for spec in devices:
        outs = dk.run(kernel, device=spec, x=x, y=y, out=np.empty(n, np.float32), n=n)
        np.testing.assert_allclose(outs["out"], x * 2 + y, rtol=1e-6, err_msg=spec)


def test_explicit_flow_with_buffers(devices):
    dev = dk.device("PYTHON")
    kernel = saxpy()
    spec = dev.renderer.render(kernel, name="saxpy")
    assert [p.name for p in spec.params] == ["x", "y", "out"] and spec.device == "PYTHON"
    compiled = dev.compiler.compile(spec)
    assert compiled.lib and compiled.name == "saxpy"
    program = dev.runtime(compiled)
    n = 64
    bx = Buffer(dev, n, "float32").copyin(np.arange(n, dtype=np.float32))
    by = Buffer(dev, n, "float32").copyin(np.ones(n, np.float32))
    bo = Buffer(dev, n, "float32")
    program.execute([bx, by, bo], [n])
    np.testing.assert_array_equal(bo.numpy(), np.arange(n) * 2 + 1)
    view = bo.view(4, offset=10)
    np.testing.assert_array_equal(view.numpy(), [21, 23, 25, 27])
    with pytest.raises(ValueError, match="'x' needs 65 elements"):
        program.execute([bx, by, bo], [n + 1])


def test_quickstart_example(devices, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
    env["DEVICEKIT_CACHE_DIR"] = str(tmp_path)
    p = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")], capture_output=True, check=False, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "device: " in p.stdout and "max abs error" in p.stdout


def test_run_with_resident_buffers(devices):
    """dk.run takes Buffers as they are: no copy in, a writable one comes back as itself (still on the device), and
    the Buffers' device is where it runs when no device is named."""
    kernel = saxpy()
    for spec in devices:
        dev = dk.device(spec)
        bx = Buffer(dev, 16, "float32").copyin(np.arange(16, dtype=np.float32))
        bo = Buffer(dev, 16, "float32")
        outs = dk.run(kernel, x=bx, y=np.ones(16, np.float32), out=bo, n=16)  # mixed: an array is copied in
        assert outs["out"] is bo
        np.testing.assert_array_equal(bo.numpy(), np.arange(16) * 2 + 1, err_msg=spec)
        again = dk.run(kernel, x=bo, y=bx, out=Buffer(dev, 16, "float32"), n=16)["out"]  # chained, on the device
        np.testing.assert_array_equal(again.numpy(), (np.arange(16) * 2 + 1) * 2 + np.arange(16), err_msg=spec)
    if "CPU" not in devices:
        pytest.skip("the wrong-device check needs CPU beside PYTHON")
    with pytest.raises(ValueError, match="'x' is a buffer on PYTHON, the program runs on CPU"):
        dk.run(kernel, "CPU", x=Buffer("PYTHON", 16, "float32"), y=np.ones(16, np.float32), n=16)


def test_run_picks_the_compiler_pair(devices, monkeypatch, capfd):
    """Both pairs compute the same values, so the values cannot tell which pair ran: the compile trace
    (DEVICEKIT_DEBUG=2 names the pair of each compile) does. A fresh kernel per pair, so no memo hides a compile."""
    if "CPU" not in devices:
        pytest.skip("needs the CPU device")
    import uuid
    x, y = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    monkeypatch.setenv("DEVICEKIT_DEBUG", "2")
    for pair, name in (("llvm", "llvm"), ("c", "c"), (1, dk.device("CPU").pair_names[1]), (0, "llvm")):
        kernel = saxpy(f"saxpy_pair_{uuid.uuid4().hex[:8]}")
        capfd.readouterr()
        np.testing.assert_array_equal(dk.run(kernel, "CPU", x=x, y=y, n=8, pair=pair)["out"], x * 2 + 1)
        trace = capfd.readouterr().err
        assert f"compiling {kernel.name} with pair {name!r}" in trace, (pair, trace[-2000:])
    monkeypatch.delenv("DEVICEKIT_DEBUG")
    kernel = saxpy()
    with pytest.raises(KeyError, match="no compiler pair 'nope'"):
        dk.run(kernel, "CPU", x=x, y=y, n=8, pair="nope")
    prog = dk.device("CPU").compile(kernel)
    with pytest.raises(TypeError, match="pair= is for compiling an ir.Kernel"):
        dk.run(prog, x=x, y=y, n=8, pair="c")


def test_run_shapes_outputs_by_the_params_shape():
    from devicekit import ir
    from devicekit.ir import dtypes
    k = ir.KernelBuilder("outer")
    n, m = k.var("n", 1, 64), k.var("m", 1, 64)
    x, y = k.param("x", dtypes.float32, size=n), k.param("y", dtypes.float32, size=m)
    o = k.param("o", dtypes.float32, shape=(n, m), writable=True)
    i, j = k.range(n, "global"), k.range(m, "global")
    o[i, j] = x[i] * y[j]
    kern = k.build()
    xs, ys = np.arange(3, dtype=np.float32), np.arange(4, dtype=np.float32)
    got = dk.run(kern, "PYTHON", x=xs, y=ys, n=3, m=4)["o"]
    assert got.shape == (3, 4)
    np.testing.assert_array_equal(got, np.outer(xs, ys))
    flat = dk.run(kern, "PYTHON", x=xs, y=ys, n=3, m=4, o=np.zeros(12, np.float32))["o"]
    assert flat.shape == (12,)  # the array passed for it decides first
