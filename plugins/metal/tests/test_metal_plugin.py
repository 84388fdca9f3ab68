"""The METAL plugin on any OS: discovery, availability with its reason, rendering details, limits, compile errors."""

from __future__ import annotations

import pickle
import warnings

import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit.ir.uop import KernelError
from devicekit_metal import env
from devicekit_metal.renderer import MAX_BUFFERS, MetalRenderer

warnings.filterwarnings("ignore", message=".*plugin.*")
not_macos = pytest.mark.skipif(env.is_macos(), reason="checks the behaviour away from macOS")


def _saxpy(dt=dtypes.float32):
    k = ir.KernelBuilder("saxpy")
    n = k.var("n", 1, 1 << 20)
    x, y = k.param("x", dt, n), k.param("y", dt, n)
    out = k.param("out", dt, n, writable=True)
    i = k.range(n, "global")
    out[i] = x[i] * 2.0 + y[i]
    return k.build()


def test_plugin_module_is_light():
    import subprocess
    import sys
    code = ("import sys, devicekit_metal.plugin as p; p.DEVICEKIT_BACKEND.device_kind().probe(); "
            "bad = [m for m in ('Metal', 'objc', 'Foundation', 'devicekit_metal.mtl', 'devicekit_metal.renderer') "
            "if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_entry_point_registered():
    from importlib.metadata import entry_points
    eps = {e.name: e.value for e in entry_points(group="devicekit")}
    assert eps.get("metal") == "devicekit_metal.plugin"


def test_declares_api_version():
    import devicekit_metal.plugin as p
    from devicekit.plugin import API_VERSION
    assert p.DEVICEKIT_API[0] == API_VERSION[0]


@not_macos
def test_listed_unavailable_with_reason():
    import devicekit as dk
    info = {d.kind: d for d in dk.devices()}
    assert "METAL" in info
    m = info["METAL"]
    assert not m.available
    assert "Metal needs macOS; this is Linux" in m.reason or "Metal needs macOS" in m.reason
    assert m.plugin == "metal"


@not_macos
def test_info_cli_lists_metal():
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-m", "devicekit.cli", "info"], capture_output=True, text=True, check=False)
    if p.returncode != 0 and "No module named" in p.stderr:
        pytest.skip("devicekit.cli not runnable as a module here")
    assert "METAL" in p.stdout and "Metal needs macOS" in p.stdout


@not_macos
def test_device_lookup_says_why():
    import devicekit as dk
    with pytest.raises(dk.DeviceUnavailableError, match="Metal needs macOS"):
        dk.device("METAL")


def test_target_renders_anywhere():
    import devicekit as dk
    t = dk.target("METAL")
    assert isinstance(t.renderer, MetalRenderer)
    assert "metal" in t.pair_names
    spec = t.renderer.render(_saxpy())
    assert spec.lang == "metal" and "kernel void dku_saxpy(" in spec.src


@not_macos
def test_compile_raises_clear_error():
    import devicekit as dk
    t = dk.target("METAL")
    spec = t.renderer.render(_saxpy())
    with pytest.raises(dk.CompileError) as ei:
        t.compiler.compile(spec)
    msg = str(ei.value)
    assert "macOS" in msg and "pyobjc-framework-Metal" in msg and "xcrun metal" in msg
    assert "Linux" in msg


@not_macos
def test_no_xcrun_pair_off_macos():
    import devicekit_metal.plugin as p
    from devicekit.backend import BackendHooks
    from devicekit.spec import DeviceSpec
    hooks = BackendHooks([p.DEVICEKIT_BACKEND])  # what the registry generates from the plugin's record
    names = [f.name for f in hooks.devicekit_compiler_pairs(DeviceSpec("METAL")) + p.devicekit_compiler_pairs(
        DeviceSpec("METAL"))]
    assert names == ["metal"]
    assert p.devicekit_compiler_pairs(DeviceSpec("CPU")) == [] == hooks.devicekit_compiler_pairs(DeviceSpec("CPU"))
    assert hooks.devicekit_allocator(DeviceSpec("CPU")) is None


# ---------------------------------------------------------------- the renderer's MSL
def test_signature():
    src = MetalRenderer().render(_saxpy()).src
    assert src.startswith("#include <metal_stdlib>\nusing namespace metal;")
    assert "kernel void dku_saxpy(" in src  # user names are dku_<name> (docs/ir.md, Names)
    assert "device const float *dku_x [[buffer(0)]]" in src
    assert "device const float *dku_y [[buffer(1)]]" in src
    assert "device float *dku_out [[buffer(2)]]" in src
    assert "constant long& dku_n [[buffer(3)]]" in src
    assert "uint3 gid [[threadgroup_position_in_grid]]" in src
    assert "uint3 lid [[thread_position_in_threadgroup]]" in src
    assert "gid.x" in src and "lid.x" in src


def test_launch_dims_in_spec():
    spec = MetalRenderer().render(_saxpy())
    assert spec.local_size is not None and spec.global_size is not None
    g, loc = spec.launch_dims({"n": 1000})
    assert g[0] * loc[0] >= 1000 and loc[0] <= 1024


def test_half_and_bfloat_types():
    assert "device half *dku_out" in MetalRenderer().render(_saxpy(dtypes.float16)).src
    spec = MetalRenderer().render(_saxpy(dtypes.bfloat16))
    assert "device bfloat *dku_out" in spec.src
    assert spec.get_meta("msl_version") == "3.1"


def test_float64_is_refused_clearly():
    assert dtypes.float64 not in MetalRenderer.supported_dtypes
    with pytest.raises(Exception, match="METAL cannot run float64: Metal has no 64-bit float"):
        MetalRenderer().render(_saxpy(dtypes.float64))


def test_local_memory_and_barrier():
    k = ir.KernelBuilder("blk")
    g = k.var("g", 1, 1 << 16)
    x = k.param("x", dtypes.float32, g * 32)
    out = k.param("out", dtypes.float32, g * 32, writable=True)
    gi, li = k.range(g, "global"), k.range(32, "local")
    sm = k.local("tile", dtypes.float32, 32)
    sm[li] = x[gi * 32 + li]
    k.barrier()
    out[gi * 32 + li] = sm[31 - li]
    spec = MetalRenderer().render(k.build())
    assert "threadgroup __attribute__((aligned(16))) float dku_tile[32];" in spec.src
    body = spec.src.split(") {\n", 1)[1].splitlines()
    assert body[0] == "  threadgroup __attribute__((aligned(16))) float dku_tile[32];"  # kernel function scope
    assert "threadgroup_barrier(mem_flags::mem_threadgroup);" in spec.src
    assert spec.get_meta("shared_bytes") == 128
    assert tuple(spec.local_size) == (32,)


def test_threadgroup_memory_limit():
    k = ir.KernelBuilder("big")
    x = k.param("x", dtypes.float32, 64)
    out = k.param("out", dtypes.float32, 64, writable=True)
    gi, li = k.range(1, "global"), k.range(64, "local")
    sm = k.local("huge", dtypes.float32, 8193)  # 32772 bytes > 32 KiB
    sm[li] = x[li]
    k.barrier()
    out[li] = sm[li] + gi.cast(dtypes.float32)
    with pytest.raises(KernelError, match="32772 bytes of local memory .*at most 32768"):
        MetalRenderer().render(k.build())


def test_threads_per_group_limit():
    k = ir.KernelBuilder("wide")
    x = k.param("x", dtypes.float32, 2048)
    out = k.param("out", dtypes.float32, 2048, writable=True)
    li = k.range(2048, "local")
    out[li] = x[li]
    with pytest.raises(KernelError, match="2048 threads .*at most 1024"):
        MetalRenderer().render(k.build())


def test_buffer_slot_limit():
    k = ir.KernelBuilder("many")
    ps = [k.param(f"p{j}", dtypes.float32, 4) for j in range(MAX_BUFFERS)]
    out = k.param("out", dtypes.float32, 4, writable=True)
    i = k.range(4, "global")
    acc = ps[0][i]
    for p in ps[1:]:
        acc = acc + p[i]
    out[i] = acc
    with pytest.raises(Exception, match="31"):
        MetalRenderer().render(k.build())


def test_precise_math_and_nan_semantics():
    k = ir.KernelBuilder("m")
    x = k.param("x", dtypes.float32, 8)
    out = k.param("out", dtypes.float32, 8, writable=True)
    i = k.range(8, "global")
    out[i] = ir.exp2(x[i]) + ir.log2(x[i]) + ir.sin(x[i]) + ir.sqrt(x[i]) + ir.maximum(x[i], 1.0)
    src = MetalRenderer().render(k.build()).src
    for fn in ("precise::exp2(", "precise::log2(", "precise::sin(", "precise::sqrt("):
        assert fn in src
    assert "max(" not in src.replace("precise::", "")  # MAX is (a<b)?b:a, not Metal's max (which drops NaN)


def test_half_math_goes_through_float():
    k = ir.KernelBuilder("hm")
    x = k.param("x", dtypes.float16, 8)
    out = k.param("out", dtypes.float16, 8, writable=True)
    i = k.range(8, "global")
    out[i] = ir.exp2(x[i])
    src = MetalRenderer().render(k.build()).src
    assert "((half)(precise::exp2(((float)(" in src


def test_renderer_pickles():
    r = pickle.loads(pickle.dumps(MetalRenderer()))
    assert isinstance(r, MetalRenderer)
    assert r.render(_saxpy()).src == MetalRenderer().render(_saxpy()).src


def test_reserved_names_are_renamed():
    from devicekit_metal.hostcheck import libclang_available, syntax_check
    k = ir.KernelBuilder("names")
    dev = k.var("device", 1, 1 << 20)
    n = k.var("gid", 1, 1 << 20)
    x = k.param("float4", dtypes.float32, dev)
    out = k.param("lid", dtypes.float32, dev, writable=True)
    i = k.range(dev, "global")
    out[i] = x[i] + n.cast(dtypes.float32)
    spec = MetalRenderer().render(k.build())
    assert [v.name for v in spec.vars] == ["device", "gid"]  # the ABI keeps the user's names
    assert "constant long& dku_device [[buffer(2)]]" in spec.src
    assert "constant long& dku_gid [[buffer(3)]]" in spec.src
    assert "device const float *dku_float4 [[buffer(0)]]" in spec.src
    if libclang_available() is None:
        assert syntax_check(spec.src) == []


def test_reserved_kernel_name_works():
    """A kernel named like an MSL type (`half`) was refused: the entry point is dku_half now."""
    from devicekit_metal.hostcheck import libclang_available, syntax_check
    k = ir.KernelBuilder("half")
    x = k.param("x", dtypes.float32, 4)
    out = k.param("out", dtypes.float32, 4, writable=True)
    i = k.range(4, "global")
    out[i] = x[i]
    spec = MetalRenderer().render(k.build())
    assert spec.name == "half" and spec.entry == "dku_half" and "kernel void dku_half(" in spec.src
    if libclang_available() is None:
        assert syntax_check(spec.src) == []
