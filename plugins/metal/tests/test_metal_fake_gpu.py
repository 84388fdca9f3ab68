"""The macOS code path (compiler, MetalContext, allocator, MetalProgram) driven against a fake `Metal` module.

The fake mimics the pyobjc surface the plugin calls (names, tuple returns for error out-params, varlist.as_buffer)
and "executes" a dispatch by running the kernel's MSL on the host through the shim (hostcheck.HostKernel) with the
buffers, offsets, setBytes values and threadgroup counts the runtime encoded. It checks the plugin's Python glue and
argument ABI, not Metal itself (test_metal_macos.py does that on a Mac).
"""

from __future__ import annotations

import sys
import time
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit_metal.hostcheck import cxx
from devicekit_metal.renderer import MetalRenderer

warnings.filterwarnings("ignore", message=".*plugin.*")


def _load_fake():
    import importlib.util
    spec = importlib.util.spec_from_file_location("devicekit_metal_fake", Path(__file__).with_name("fake_metal.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

pytestmark = pytest.mark.skipif(cxx() is None, reason="the fake GPU runs kernels with a host C++ compiler")

fake = _load_fake()
SPECS = fake.SPECS
FakeLibrary = fake.FakeLibrary


@pytest.fixture
def fake_metal(monkeypatch, request):
    from devicekit_metal import mtl
    dev = fake.install(monkeypatch, hide_xcode="fake_xcode" not in request.fixturenames)
    yield dev
    mtl.metal_context.cache_clear()
    mtl._LIBRARIES.clear()


def _device():
    import devicekit as dk
    from devicekit_metal.allocator import MetalAllocator
    from devicekit_metal.compiler import MetalCompiler
    from devicekit_metal.mtl import metal_context
    from devicekit_metal.runtime import MetalProgram
    ctx = metal_context(0)
    compiler = MetalCompiler(0)
    compiler.use_cache = False  # keep the fake's output out of the user's compile cache
    return dk.Device("METAL", MetalAllocator(ctx), MetalRenderer(), compiler, lambda c: MetalProgram(c, ctx))


def _kernel():
    k = ir.KernelBuilder("fake_axpy")
    n = k.var("n", 1, 1 << 20)
    s = k.var("s", -100, 100)
    x, y = k.param("x", dtypes.float32, n), k.param("y", dtypes.int32, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = x[i] * s.cast(dtypes.float32) + y[i].cast(dtypes.float32)
    return k.build()


def test_run_through_the_macos_path(fake_metal):
    import devicekit as dk
    kern = _kernel()
    SPECS["dku_fake_axpy"] = MetalRenderer().render(kern)  # by entry symbol
    dev = _device()
    x = np.linspace(-1, 1, 700).astype(np.float32)
    y = np.arange(700, dtype=np.int32)
    got = dk.run(kern, device=dev, x=x, y=y, n=700, s=-3)["out"]
    want = dk.run(kern, device="PYTHON", x=x, y=y, n=700, s=-3)["out"]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    name, grid, group, vals = fake_metal.log[-1]
    assert name == "dku_fake_axpy" and vals == [700, -3]
    assert grid == (3, 1, 1) and group == (256, 1, 1)


def test_views_offsets_and_timing(fake_metal):
    import devicekit as dk
    kern = _kernel()
    SPECS["dku_fake_axpy"] = MetalRenderer().render(kern)  # by entry symbol
    dev = _device()
    prog = dev.compile(kern)
    from devicekit_metal.compiler import MAGIC_SOURCE
    assert prog.compiled.lib.startswith(MAGIC_SOURCE)
    n = 64
    bx = dk.Buffer(dev, n, dtypes.float32).copyin(np.ones(n, np.float32))
    by = dk.Buffer(dev, n, dtypes.int32).copyin(np.arange(n, dtype=np.int32))
    bo = dk.Buffer(dev, n, dtypes.float32)
    t0 = time.perf_counter()
    t = prog.execute([bx, by, bo], [n, 2], wait=True)
    wall = time.perf_counter() - t0
    assert t == fake.LAST_GPU_S[0] and 0 < t <= wall  # the command buffer's GPU time, not the call's
    np.testing.assert_allclose(bo.numpy(), 2 + np.arange(n))
    # allocator views: offset handles share the MTLBuffer
    alloc = dev.allocator
    h = alloc.alloc(32)
    alloc.copyin(h, memoryview(bytes(range(32))))
    v = alloc.offset(h, 8, 4)
    out = bytearray(8)
    alloc.copyout(memoryview(out), v)
    assert bytes(out) == bytes(range(4, 12))
    assert bytes(alloc.as_buffer(h, 3)) == bytes(range(3))


def test_compile_error_carries_metal_log(fake_metal):
    import devicekit as dk
    from devicekit.render.program_spec import ProgramSpec
    from devicekit_metal.compiler import MetalCompiler
    c = MetalCompiler()
    c.use_cache = False
    spec = ProgramSpec(name="bad", src="#include <metal_stdlib>\n#error nope\n", device="METAL", lang="metal",
                       params=())
    with pytest.raises(dk.CompileError) as ei:
        c.compile(spec)
    assert "deliberate" in ei.value.log and "newLibraryWithSource" in ei.value.message


def test_compile_options_safe_math_and_bf16_version(fake_metal):
    from devicekit_metal.mtl import compile_options
    o = compile_options(sys.modules["Metal"], "kernel void k(device bfloat *x) {}")
    assert o.fast_math is False and o.version == (3 << 16) + 1
    o = compile_options(sys.modules["Metal"], "kernel void k(device float *x) {}")
    assert o.version is None


def test_too_many_threads_is_refused(fake_metal):
    import devicekit as dk
    kern = _kernel()
    SPECS["dku_fake_axpy"] = MetalRenderer().render(kern)  # by entry symbol
    dev = _device()
    prog = dev.compile(kern)
    bufs = [dk.Buffer(dev, 8, d) for d in (dtypes.float32, dtypes.int32, dtypes.float32)]
    with pytest.raises(ValueError, match=r"threadgroup \(local_size\)\[0\] = 2048 exceeds .* limit of 1024"):
        prog.execute(bufs, [8, 1], global_size=(1,), local_size=(2048,))


@pytest.mark.parametrize("grid,group,limit", [
    ((-5,), (1,), r"global_size\[0\] = -5 is below 0"),
    ((1,), (0,), r"local_size\[0\] = 0 is below 1"),
    ((1,), (64, 32), r"2048 work-items per group; METAL:0 \(Fake Apple GPU\) runs at most 1024"),
    ((1 << 40,), (1,), r"1099511627776 x 1 = 1099511627776 work-items on axis 0; METAL:0 .* runs at most 4294967295"),
    ((1,), (1.0,), r"local_size\[0\] must be an int, got float"),
    ((1, 1, 1, 1), (1,), "has 4 axes"),
])
def test_launch_sizes_are_checked_before_encoding(fake_metal, grid, group, limit):
    """A negative grid or an empty threadgroup was encoded as it was (MTLSizeMake of a negative NSUInteger) or ran
    nothing silently: one LaunchError naming the limit, and nothing committed."""
    import devicekit as dk
    from devicekit.errors import LaunchError
    kern = _kernel()
    SPECS["dku_fake_axpy"] = MetalRenderer().render(kern)
    dev = _device()
    prog = dev.compile(kern)
    bufs = [dk.Buffer(dev, 8, d) for d in (dtypes.float32, dtypes.int32, dtypes.float32)]
    fake.ENCODERS.clear()
    with pytest.raises(LaunchError, match=limit):
        prog.execute(bufs, [8, 1], global_size=grid, local_size=group, wait=True)
    assert not fake.ENCODERS


@pytest.mark.parametrize("wait", [True, False], ids=["wait=True", "wait=False+wait()"])
def test_ctrl_c_interrupts_a_kernel_that_never_ends(fake_metal, wait):
    """While the fake's gate is closed a committed command buffer stays scheduled and waitUntilCompleted blocks in
    native code that no signal interrupts (as Metal's does): SIGINT must raise KeyboardInterrupt while the kernel
    still runs (the runtime polls the status), not when the 10 s hang guard lets the wait return."""
    import devicekit as dk
    from devicekit import interrupt
    from devicekit.testing.native_gate import check_ctrl_c_interrupts
    kern = _kernel()
    SPECS["dku_fake_axpy"] = MetalRenderer().render(kern)
    dev = _device()
    prog = dev.compile(kern)
    bufs = [dk.Buffer(dev, 8, d) for d in (dtypes.float32, dtypes.int32, dtypes.float32)]
    prog.execute(bufs, [8, 1], wait=True)  # the fake builds its host kernel at the first commit: not in the wait
    check_ctrl_c_interrupts(fake.GATE, (lambda: prog.execute(bufs, [8, 1], wait=True)) if wait
                            else (lambda: prog.execute(bufs, [8, 1]).wait()))
    assert interrupt.wait_pending(5)
    dev.synchronize()  # the command buffer interrupted in wait() is still tracked, and completes
    assert prog.ctx._in_flight == []


HAND_WRITTEN = """#include <metal_stdlib>
using namespace metal;
kernel void hw_axpy(device const float *x [[buffer(0)]], device float *y [[buffer(1)]],
                    constant long& n [[buffer(2)]], constant int& a [[buffer(3)]],
                    uint i [[thread_position_in_grid]]) {
  if ((long)i < n) y[i] = (float)a * x[i] + y[i];
}
"""


def test_program_from_source(fake_metal):
    import devicekit as dk
    from devicekit_metal.hostcheck import libclang_available
    if libclang_available() is not None:
        pytest.skip(libclang_available())
    dev = _device()
    SPECS["hw_axpy"] = MetalRenderer().parse_source(HAND_WRITTEN, "hw_axpy")
    prog = dev.program_from_source(HAND_WRITTEN, "hw_axpy")
    bx = dk.Buffer(dev, 100, dtypes.float32).copyin(np.arange(100, dtype=np.float32))
    by = dk.Buffer(dev, 100, dtypes.float32).copyin(np.ones(100, np.float32))
    prog.execute([bx, by], [100, -2], global_size=(2,), local_size=(64,), wait=True)
    np.testing.assert_allclose(by.numpy(), -2 * np.arange(100) + 1)


def test_hand_written_binds_at_its_indices_with_typed_bytes_and_threadgroup_memory(fake_metal):
    """Scalars before buffers at higher indices, and two threadgroup arguments: setBuffer/setBytes at the
    attribute's index, each scalar in its own size, setThreadgroupMemoryLength (a multiple of 16) per argument."""
    import pathlib

    import devicekit as dk
    from devicekit_metal.hostcheck import libclang_available
    if libclang_available() is not None:
        pytest.skip(libclang_available())
    src = (pathlib.Path(__file__).parent / "corpus" / "two_stage_buffers.metal").read_text()
    dev = _device()
    opts = {"shared_bytes": {"tmp_a": "32 * 4", "tmp_b": 130}, "global_size": (2,), "local_size": (32,)}
    SPECS["scale_shift"] = MetalRenderer().parse_source(src, "scale_shift", **opts)
    prog = dev.program_from_source(src, "scale_shift", **opts)
    x = np.arange(64, dtype=np.float32)
    out = dk.run(prog, scale=2.0, shift=0.5, **{"in": x, "out": np.zeros(64, np.float32)})["out"]
    np.testing.assert_allclose(out, 2 * x + 0.5)
    enc = fake.ENCODERS[-1]
    assert sorted(enc.bufs) == [0, 1] and {k: len(v) for k, v in enc.bytes.items()} == {2: 4, 3: 4}
    assert enc.tg == {0: 128, 1: 144}  # rounded up to 16


# ---------------------------------------------------------------- the xcrun pair, with a fake Xcode toolchain
FAKE_XCRUN = r"""#!/bin/sh
# fake `xcrun` for tests: -find prints a path; `metal` copies the source to the .air (fails on #error);
# `metallib` writes "MTLB" + the .air
[ "$1" = "-sdk" ] && shift 2
tool="$1"; shift
case "$tool" in
  -find) echo "/fake/$1"; exit 0 ;;
  metal)
    [ "$1" = "--version" ] && { echo "fake metal 32023.1"; exit 0; }
    case " $* " in *" -emit-llvm "*) echo "; ModuleID = 'fake AIR'"; exit 0 ;; esac
    src=""; out=""
    while [ $# -gt 0 ]; do case "$1" in -o) out="$2"; shift ;; -c) src="$2"; shift ;; esac; shift; done
    if grep -q "#error" "$src"; then echo "$src:2:2: error: deliberate" >&2; exit 1; fi
    cp "$src" "$out" ;;
  metallib)
    air="$1"; out="$3"; { printf 'MTLB'; cat "$air"; } > "$out" ;;
esac
"""


@pytest.fixture
def fake_xcode(tmp_path, monkeypatch):
    from devicekit_metal import env
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "xcrun").write_text(FAKE_XCRUN)
    (bin_dir / "xcode-select").write_text("#!/bin/sh\necho /Applications/Xcode.app/Contents/Developer\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    monkeypatch.setattr(env, "is_macos", lambda: True)
    env.xcrun_metal.cache_clear()
    yield bin_dir
    env.xcrun_metal.cache_clear()


def test_xcrun_compiler_and_metallib_loading(fake_xcode, fake_metal, monkeypatch):
    from devicekit_metal.compiler import MAGIC_METALLIB, MetalXcrunCompiler
    from devicekit_metal.mtl import load_library
    c = MetalXcrunCompiler()
    c.use_cache = False
    assert c.identity().startswith("metal-xcrun:fake metal 32023.1:")
    spec = MetalRenderer().render(_kernel())
    lib = c.compile(spec).lib
    assert lib.startswith(MAGIC_METALLIB) and lib[4:].decode() == spec.src
    # loading a metallib without pyobjc-framework-libdispatch goes through a file URL
    urls = []
    foundation = types.ModuleType("Foundation")
    foundation.NSURL = types.SimpleNamespace(fileURLWithPath_=lambda p: urls.append(Path(p).read_bytes()) or p)
    monkeypatch.setitem(sys.modules, "Foundation", foundation)
    monkeypatch.setitem(sys.modules, "libdispatch", None)  # import fails
    fake_metal.newLibraryWithURL_error_ = lambda url, err: (FakeLibrary(spec.src), None)
    library = load_library(fake_metal, lib)
    assert urls == [lib] and library.newFunctionWithName_("dku_fake_axpy") is not None


def test_xcrun_compile_error_has_log(fake_xcode, fake_metal):
    import devicekit as dk
    from devicekit.render.program_spec import ProgramSpec
    from devicekit_metal.compiler import MetalXcrunCompiler
    c = MetalXcrunCompiler()
    c.use_cache = False
    spec = ProgramSpec(name="bad", src="#include <metal_stdlib>\n#error nope\n", device="METAL", lang="metal",
                       params=())
    with pytest.raises(dk.CompileError) as ei:
        c.compile(spec)
    assert "deliberate" in ei.value.log and "metal rejected" in ei.value.message


def test_pairs_on_macos_prefer_xcrun(fake_xcode):
    import devicekit_metal.plugin as p
    from devicekit.backend import BackendHooks
    from devicekit.spec import DeviceSpec
    offered = BackendHooks([p.DEVICEKIT_BACKEND]).devicekit_compiler_pairs(DeviceSpec("METAL"))  # the record's
    pairs = sorted(offered + p.devicekit_compiler_pairs(DeviceSpec("METAL")), key=lambda f: -f.priority)
    assert [f.name for f in pairs] == ["xcrun", "metal"]
    assert pairs[0].compiler(DeviceSpec("METAL")).toolchain == "xcrun metal + metallib"


def test_xcrun_missing_is_a_reasoned_skip(monkeypatch):
    from devicekit_metal import env
    from devicekit_metal.compiler import MetalXcrunCompiler
    monkeypatch.setattr(env, "xcrun_metal", lambda: None)
    with pytest.raises(RuntimeError, match="Metal toolchain was not found"):
        MetalXcrunCompiler()


def test_in_flight_list_is_pruned(fake_metal):
    import devicekit as dk
    kern = _kernel()
    dev = _device()
    prog = dev.compile(kern)
    bufs = [dk.Buffer(dev, 8, d) for d in (dtypes.float32, dtypes.int32, dtypes.float32)]
    for _ in range(300):
        prog.execute(bufs, [8, 1])
    ctx = prog.ctx
    assert len(ctx._in_flight) < 256
    dev.synchronize()
    assert ctx._in_flight == []


def test_show_asm(fake_xcode, fake_metal):
    from devicekit_metal.compiler import MetalCompiler, MetalXcrunCompiler
    src = MetalRenderer().render(_kernel()).src
    assert MetalXcrunCompiler().disassemble(src).startswith("; ModuleID")
    assert MetalCompiler().disassemble(b"").startswith("(no disassembly")


def _scalar_kernel(name, dts):
    """o_<dt>[i] = x_<dt>[i] * s_<dt> + s_<dt> (bool: x ^ s) for each dtype, a k.scalar s_<dt> of each."""
    k = ir.KernelBuilder(name)
    n = k.var("n", 1, 64)
    i = k.range(n, "global")
    for dt in dts:
        s = k.scalar(f"s_{dt.name}", dt)
        x, o = k.param(f"x_{dt.name}", dt, n), k.param(f"o_{dt.name}", dt, n, writable=True)
        o[i] = x[i] ^ s if dt.is_bool else x[i] * s + s
    return k.build()


def test_scalars_of_every_metal_dtype_bind_their_bytes(fake_metal):
    """A k.scalar is set with setBytes in its wire dtype's size (bool 1 byte, half/bfloat16 as a 4-byte float) and
    the kernel computes what the reference does; Metal has no double, so a float64 scalar is refused at render."""
    import devicekit as dk
    from devicekit.ir.dtypes import from_numpy_values
    values = {"bool": True, "int8": -128, "int16": 32767, "int32": -2**31, "int64": 2**62 + 7, "uint8": 255,
              "uint16": 65535, "uint32": 2**32 - 1, "uint64": 2**64 - 3, "float16": 1.3, "bfloat16": -2.7,
              "float32": 0.1}
    with pytest.raises(ir.KernelError, match="does not support dtypes.float64"):
        MetalRenderer().render(_scalar_kernel("f64", [dtypes.float64]))
    dev = _device()
    rng = np.random.default_rng(1)
    groups = [[d for d in dtypes.ints()], [dtypes.bool, dtypes.float16, dtypes.bfloat16, dtypes.float32]]
    for g, dts in enumerate(groups):
        kern = _scalar_kernel(f"fake_scalars{g}", dts)
        SPECS[f"dku_fake_scalars{g}"] = MetalRenderer().render(kern)
        args = {"n": 5}
        for dt in dts:
            x = rng.random(5) < 0.5 if dt.is_bool else (rng.standard_normal(5) * 3).astype(dt.np_compute) \
                if dt.is_float else np.arange(5).astype(dt.np)
            args[f"x_{dt.name}"] = x if dt != dtypes.bfloat16 else from_numpy_values(x, dt)
            args[f"s_{dt.name}"] = values[dt.name]
        got = dk.run(kern, device=dev, **args)
        want = dk.run(kern, device="PYTHON", **args)
        for dt in dts:
            np.testing.assert_array_equal(got[f"o_{dt.name}"], want[f"o_{dt.name}"], err_msg=dt.name)
        _, _, _, vals = fake_metal.log[-1]
        for dt, v in zip(dts, vals[1:]):  # the bytes as set: exact ints and bools, floats rounded to their dtype
            assert v == values[dt.name] if not dt.is_float else v == pytest.approx(values[dt.name], rel=1e-2)
