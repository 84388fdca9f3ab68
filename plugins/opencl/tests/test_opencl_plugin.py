"""The OpenCL plugin on a real platform (PoCL here): discovery and priority, the renderer's choices, views, the
compiler's identity and errors, hand-written source, threads."""

from __future__ import annotations

import threading
from pathlib import Path

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir, kernels
from devicekit.ir.dtypes import dtypes
from devicekit.testing.conformance import check_against_reference


def test_pocl_does_not_become_the_default_device(cl_device):
    from devicekit.plugin import SOFTWARE_PRIORITY
    from devicekit.registry import get_registry
    from devicekit_opencl import platform
    a = platform.probe()
    assert a.ok and a.priority == SOFTWARE_PRIORITY  # PoCL's device is CPU-type: below CPU (10)
    row = next(d for d in dk.devices() if d.kind == "OPENCL")
    assert row.priority == SOFTWARE_PRIORITY
    assert get_registry().default_spec().kind != "OPENCL"


def test_ids_and_unavailable_reasons(run_py):
    listing = ("-c", ("import devicekit as dk; print([(d.spec, d.available, d.reason) for d in dk.devices() "
                     "if d.kind == 'OPENCL'])"))
    two = run_py(*listing, env={"POCL_DEVICES": "pthread pthread"})
    assert "('OPENCL', True, '')" in two.stdout and "('OPENCL:1', True, '')" in two.stdout, two.stdout + two.stderr
    none = run_py(*listing, env={"POCL_DEVICES": "nonexistent"})
    assert "no OpenCL platform has a device" in none.stdout, none.stdout + none.stderr
    gpu = run_py(*listing, env={"DEVICEKIT_OPENCL_DEVICE": "gpu"})
    assert "has no device of type gpu" in gpu.stdout, gpu.stdout + gpu.stderr
    plat = run_py(*listing, env={"DEVICEKIT_OPENCL_PLATFORM": "no-such-vendor"})
    assert "'no-such-vendor' matches no platform" in plat.stdout, plat.stdout + plat.stderr
    bad = run_py(*listing, env={"DEVICEKIT_OPENCL_DEVICE": "x,y"})
    assert "DEVICEKIT_OPENCL_DEVICE" in bad.stdout + bad.stderr


def test_source_is_opencl_c_with_wrapping_ints(cl_device):
    k = ir.KernelBuilder("local")
    n = k.var("global", 1, 1 << 20)
    x = k.param("half", dtypes.int32, n)
    out = k.param("kernel", dtypes.int32, n, writable=True)
    i = k.range(n, "global")
    out[i] = x[i] * 3 + 1
    src = cl_device.renderer.render(k.build()).src
    assert "__kernel void dku_local(" in src and "long long" not in src
    assert "#pragma OPENCL FP_CONTRACT OFF" in src
    assert "as_int(" in src and "(uint)" in src  # int32 arithmetic through uint: it wraps
    assert "ulong dk_off0" in src  # buffers come as (base, byte offset)


def test_unaligned_views_run_in_generated_kernels(cl_device):
    base = dk.Buffer(cl_device, 64, dtypes.float32).copyin(np.arange(64, dtype=np.float32))
    out = dk.Buffer(cl_device, 64, dtypes.float32).copyin(np.zeros(64, np.float32))
    prog = cl_device.compile(kernels.elementwise("a * 2.0", name="dbl"))
    a, o = base.view(10, offset=3), out.view(10, offset=5)  # 12 and 20 bytes in: no sub-buffer could start there
    prog.execute([a, o], [10])
    got = out.numpy()
    np.testing.assert_array_equal(got[5:15], np.arange(3, 13, dtype=np.float32) * 2)
    assert not got[:5].any() and not got[15:].any()


def test_hand_written_views_need_aligned_offsets(cl_device):
    src = "__kernel void add1(__global float *x, int n) { int i = get_global_id(0); if (i < n) x[i] += 1.0f; }"
    prog = cl_device.program_from_source(src, "add1", sizes={"x": "n"}, global_size="n", local_size=1)
    base = dk.Buffer(cl_device, 128, dtypes.float32).copyin(np.zeros(128, np.float32))
    prog.execute([base.view(32, offset=32)], [32])  # 128 bytes in: PoCL's CL_DEVICE_MEM_BASE_ADDR_ALIGN
    got = base.numpy()
    assert (got[32:64] == 1).all() and not got[:32].any() and not got[64:].any()
    with pytest.raises(ValueError, match="aligned to 128 bytes"):
        prog.execute([base.view(8, offset=3)], [8])


def test_hand_written_kernel_with_local_memory(cl_device):
    src = """
    __kernel void blocksum(__global const float *x, __global float *out, __local float *tile, int n) {
      int g = get_group_id(0), l = get_local_id(0);
      tile[l] = x[g * 16 + l];
      barrier(CLK_LOCAL_MEM_FENCE);
      if (l == 0) { float s = 0; for (int i = 0; i < 16; i++) s += tile[i]; out[g] = s; }
    }"""
    prog = cl_device.program_from_source(src, "blocksum", sizes={"x": "n*16", "out": "n"}, global_size="n",
                                         local_size=16, shared_bytes={"tile": 64})
    x = np.arange(64, dtype=np.float32)
    got = dk.run(prog, cl_device, x=x, out=np.zeros(4, np.float32), n=4)["out"]
    np.testing.assert_allclose(got, x.reshape(4, 16).sum(1))


def test_compile_errors_and_identity(cl_device):
    with pytest.raises(dk.CompileError) as e:
        cl_device.program_from_source("__kernel void f(__global float *x) { x[0] = ; }", "f")
    assert "expected expression" in str(e.value)
    with pytest.raises(dk.CompileError, match="must be a __kernel function"):
        cl_device.program_from_source("void f(__global float *x) { }", "f")
    with pytest.raises(dk.CompileError, match="cannot be used as the type of a kernel parameter"):
        cl_device.program_from_source("__kernel void f(__global float *x, bool b) { }", "f")
    ident = cl_device.compiler.identity()
    dev = cl_device.compiler.ctx.device
    assert dev.name in ident and dev.driver_version in ident and "-cl-fast-relaxed-math" not in ident
    assert "-cl-fp32-correctly-rounded-divide-sqrt" in ident  # PoCL offers it: division and sqrt round correctly


def test_float16_follows_the_extension(cl_device):
    has = "cl_khr_fp16" in cl_device.compiler.ctx.device.extensions
    assert (dtypes.float16 in cl_device.renderer.supported_dtypes) == has
    assert dtypes.float64 in cl_device.renderer.supported_dtypes  # PoCL has cl_khr_fp64


def test_threads_share_one_program(cl_device):
    prog = cl_device.compile(kernels.elementwise("a + b", name="tadd"))
    errors: list[BaseException] = []

    def job(i: int) -> None:
        try:
            n = 500 + i
            a, b = np.full(n, i, np.float32), np.arange(n, dtype=np.float32)
            bufs = [dk.Buffer(cl_device, n, dtypes.float32).copyin(x) for x in (a, b, np.zeros(n, np.float32))]
            for _ in range(5):
                prog.execute(bufs, [n])
                np.testing.assert_array_equal(bufs[2].numpy(), a + b)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=job, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]


def test_division_and_shifts_follow_the_reference(cl_device):
    k = ir.KernelBuilder("divs")
    n = k.var("n", 1, 64)
    a, b = k.param("a", dtypes.int32, n), k.param("b", dtypes.int32, n)
    q, r = k.param("q", dtypes.int32, n, writable=True), k.param("r", dtypes.int32, n, writable=True)
    i = k.range(n, "global")
    q[i] = a[i] // b[i]
    r[i] = (a[i] % b[i]) + (a[i] << 31)
    mn = np.iinfo(np.int32).min
    inputs = {"a": np.array([7, -7, mn, mn, 5, 0], np.int32), "b": np.array([2, 2, -1, 0, 0, 3], np.int32),
              "q": np.zeros(6, np.int32), "r": np.zeros(6, np.int32), "n": 6}
    check_against_reference(k.build(), inputs, cl_device, "x / 0, MIN / -1, MIN % -1, << 31")


_SIZEOF = """{pre}
__kernel void f(__global T *x, __global int *size) {{ size[0] = sizeof(T); }}"""


@pytest.mark.parametrize("pre", [
    "#ifdef cl_khr_fp16\n#pragma OPENCL EXTENSION cl_khr_fp16 : enable\ntypedef half T;\n#else\ntypedef float T;\n#endif",
    "#if defined(cl_khr_fp64)\ntypedef double T;\n#else\ntypedef float T;\n#endif",
    "#if __OPENCL_VERSION__ >= 200\ntypedef long T;\n#else\ntypedef short T;\n#endif",
    "#ifdef __IMAGE_SUPPORT__\ntypedef int T;\n#else\ntypedef char T;\n#endif",
], ids=["cl_khr_fp16", "cl_khr_fp64", "__OPENCL_VERSION__", "__IMAGE_SUPPORT__"])
def test_the_reader_sees_the_macros_the_driver_defines(cl_device, pre):
    """A type chosen by #ifdef on what the driver predefines: the signature's element is the one the driver
    compiles (the kernel reports sizeof(T)); the reader used to define cl_khr_fp16 on every device, and no
    __OPENCL_VERSION__ at all."""
    prog = cl_device.program_from_source(_SIZEOF.format(pre=pre), "f", sizes={"x": 1, "size": 1})
    size = dk.run(prog, cl_device, x=np.zeros(8, np.uint8).view(prog.spec.params[0].dtype.np)[:1])["size"]
    assert size[0] == prog.spec.params[0].dtype.itemsize


def test_the_reader_follows_the_renderer_extensions():
    """Without a device: the renderer's extension list decides (half only with cl_khr_fp16, double only with
    cl_khr_fp64)."""
    from devicekit_opencl.renderer import OpenCLRenderer
    src = (Path(__file__).parent / "corpus" / "relu_storage.cl").read_text()
    assert OpenCLRenderer(fp16=True).parse_source(src, "relu_inplace").params[0].dtype == dtypes.float16
    assert OpenCLRenderer().parse_source(src, "relu_inplace").params[0].dtype == dtypes.float32
    dbl = _SIZEOF.format(pre="#ifdef cl_khr_fp64\ntypedef double T;\n#else\ntypedef float T;\n#endif")
    assert OpenCLRenderer(fp64=False).parse_source(dbl, "f").params[0].dtype == dtypes.float32
    with pytest.raises(dk.CompileError, match="requires cl_khr_fp64"):
        OpenCLRenderer(fp64=False).parse_source("__kernel void f(__global double *x) {}", "f")


def test_build_option_defines_reach_the_reader(cl_device, monkeypatch):
    """-D in DEVICEKIT_OPENCL_BUILD_OPTIONS (joined or as two words) defines types and sizes for the reader as for
    the driver: a kernel written for `-D REAL=double -DTILE=8` reads and builds."""
    from devicekit_opencl.compiler import OpenCLCompiler
    monkeypatch.setenv("DEVICEKIT_OPENCL_BUILD_OPTIONS", "-D REAL=double -DTILE=8")
    src = "__kernel void f(__global REAL *x, __local REAL *tile) { tile[0] = x[0]; x[TILE - 1] = tile[0]; }"
    spec = cl_device.renderer.parse_source(src, "f", shared_bytes=64)
    assert spec.params[0].dtype == dtypes.float64
    compiler = OpenCLCompiler(0)  # reads the options now, as a device made in this environment does
    assert "-DTILE=8" in compiler.options and compiler.compile(spec).lib  # the driver built it with the defines
    monkeypatch.delenv("DEVICEKIT_OPENCL_BUILD_OPTIONS")
    with pytest.raises(dk.CompileError, match="signature does not parse"):
        cl_device.renderer.parse_source(src, "f", shared_bytes=64)


def test_float3_buffers_have_a_four_lane_stride(cl_device):
    """OpenCL pads float3 to 16 bytes: a `float3 *` buffer is four lanes an element (it used to be read as three, so
    the launch passed 12-byte elements and the kernel ran past the end)."""
    src = "__kernel void f(__global float3 *p, int n) { int i = get_global_id(0); if (i < n) p[i] = (float3)(i, 2 * i, 3 * i); }"
    prog = cl_device.program_from_source(src, "f", sizes={"p": "n"}, global_size=(1,), local_size=(8,))
    assert prog.spec.params[0].dtype == dtypes.float32.vec(4)
    got = dk.run(prog, cl_device, p=np.full((8, 4), -1, np.float32), n=8)["p"].reshape(8, 4)
    np.testing.assert_array_equal(got[:, :3], np.arange(8)[:, None] * np.array([1, 2, 3], np.float32))


@pytest.mark.parametrize("param", ["__read_only image2d_t img", "sampler_t smp", "__write_only image2d_t out"])
def test_images_and_samplers_are_refused_in_one_line(param):
    from devicekit_opencl.renderer import OpenCLRenderer
    with pytest.raises(dk.CompileError, match="images, samplers, events, queues and pipes cannot be passed") as e:
        OpenCLRenderer().parse_source(f"__kernel void f(__global float *x, {param}) {{ }}", "f")
    assert "\n" not in e.value.message and "__global buffer (uchar4 *, float4 *)" in e.value.message


def test_kernel_qualifier_is_read_from_the_attribute_not_the_tokens():
    """A name or qualifier spelled by a macro is still a kernel (it used to be refused: the check looked for the
    entry's name among the raw tokens); another attribute does not make a helper a kernel."""
    from devicekit_opencl.renderer import OpenCLRenderer
    r = OpenCLRenderer()
    for src in ("#define NAME scale\n__kernel void NAME(__global float *x) { }",
                "#define KERNEL __kernel\n#define N(a) a##_f\nKERNEL void N(scale)(__global float *x) { }"):
        entry = "scale" if "NAME" in src else "scale_f"
        assert [p.name for p in r.parse_source(src, entry).params] == ["x"]
    with pytest.raises(dk.CompileError, match="must be a __kernel function"):
        r.parse_source("__attribute__((always_inline)) void helper(__global float *x) { }", "helper")


def test_reqd_work_group_size_is_the_default_and_checked(cl_device):
    """A kernel that declares reqd_work_group_size (through macros, as NVIDIA's samples do) runs with it when the
    launch gives no local size, and another local size is refused saying which (it was a bare
    INVALID_WORK_GROUP_SIZE from the driver)."""
    src = """#define BX 16
    #define BY 4
    __kernel __attribute__((reqd_work_group_size(BX, BY, 1))) void fill(__global int *out, int w) {
      out[get_global_id(1) * w + get_global_id(0)] = get_local_size(0) * 100 + get_local_size(1);
    }"""
    prog = cl_device.program_from_source(src, "fill", sizes={"out": "w * 8"}, global_size=(2, 2))
    got = dk.run(prog, cl_device, w=32)["out"]
    assert (got == 1604).all() and got.size == 256
    with pytest.raises(ValueError, match=r"declares reqd_work_group_size\(16, 4, 1\); it was launched with local "
                                         r"size \(8, 8\): pass local_size=\(16, 4, 1\)"):
        dk.run(prog, cl_device, w=32, global_size=(4, 1), local_size=(8, 8))


def test_a_launch_not_waited_for_is_its_event(cl_device):
    from devicekit_opencl.runtime import EventLaunch
    prog = cl_device.compile(kernels.elementwise("a * b", name="evmul"))
    bufs = [dk.Buffer(cl_device, 4096, "float32").copyin(np.full(4096, 3, np.float32)) for _ in range(3)]
    h = prog.execute(bufs, [4096])
    assert isinstance(h, EventLaunch) and not h.done
    t = h.wait()
    assert h.done and 0 <= t < 10 and h.wait() == t  # the kernel's time from the event's profile, once
    np.testing.assert_array_equal(bufs[2].numpy(), np.full(4096, 9, np.float32))
