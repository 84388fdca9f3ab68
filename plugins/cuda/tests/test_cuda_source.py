"""Hand-written CUDA kernels: `CUDARenderer.parse_source` reads the signature with libclang; the kernel compiles to a
cubin, runs in host emulation, and runs through the runtime on the fake driver with its own argument layout."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cuda_fake_pycuda as fake
from cuda_host_emu import CXX, host_compile_many
from devicekit.compile import CompileError
from devicekit.ir.dtypes import dtypes
from devicekit_cuda import toolchain
from devicekit_cuda.renderer import CUDARenderer

clang = pytest.importorskip("clang.cindex", reason="the libclang wheel reads hand-written kernels")

SRC = r"""#include <cuda_fp16.h>
// out[i] = half(x[i] * k) + bias[i % 4]
extern "C" __global__ void scale(const float* __restrict__ x, const half* bias, half* out, int n, unsigned char k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2half(x[i] * k + __half2float(bias[i % 4]));
}
"""


def _spec(**kw):
    kw.setdefault("sizes", {"x": "n", "bias": 4, "out": "n"})
    kw.setdefault("global_size", ("(n + 127) // 128",))
    kw.setdefault("local_size", (128,))
    return CUDARenderer().parse_source(SRC, "scale", **kw)


def test_signature():
    spec = _spec()
    assert [(p.name, p.dtype, p.writable) for p in spec.params] == [
        ("x", dtypes.float32, False), ("bias", dtypes.float16, False), ("out", dtypes.float16, True)]
    assert [(v.name, v.lo, v.hi) for v in spec.vars] == [("n", -(2**31), 2**31 - 1), ("k", 0, 255)]
    assert spec.get_meta("arg_format") == "PPPiB"  # the kernel's own C types, not int64 vars
    assert spec.launch_dims({"n": 1000, "k": 3}) == ((8,), (128,))
    assert spec.buffer_sizes({"n": 1000, "k": 3}) == [1000, 4, 1000]


@pytest.mark.skipif(toolchain.nvrtc()[0] is None, reason="NVRTC not found")
def test_compiles_to_cubin():
    from devicekit_cuda.compiler import CUDACompiler
    from devicekit_cuda.cubin import inspect
    info = inspect(CUDACompiler("sm_80").compile(_spec()).lib)
    assert info.arch == "sm_80" and "scale" in info.functions


def _want(x, bias, n, k):
    return (x[:n] * k + bias.astype(np.float32)[np.arange(n) % 4]).astype(np.float16)


@pytest.mark.skipif(CXX is None, reason="no host C++ compiler")
def test_runs_in_host_emulation():
    hk = host_compile_many([_spec()])["scale"]
    x = np.linspace(-2, 2, 300).astype(np.float32)
    bias = np.array([0.5, -1, 2, 0], np.float16)
    got = hk(x=x, bias=bias, n=300, k=3)["out"]
    np.testing.assert_allclose(got.astype(np.float32), _want(x, bias, 300, 3).astype(np.float32), rtol=1e-3)


@pytest.mark.skipif(CXX is None or toolchain.nvrtc()[0] is None, reason="needs a host C++ compiler and NVRTC")
def test_program_from_source_on_fake_driver(monkeypatch):
    import devicekit as dk
    from devicekit.spec import DeviceSpec
    from devicekit.targets import Device
    from devicekit_cuda import context, plugin
    fake.install(monkeypatch)
    monkeypatch.setattr(context, "_contexts", {})
    monkeypatch.setattr(fake, "KERNELS", host_compile_many([_spec()]))
    spec = DeviceSpec("CUDA")
    dev = Device(spec, *plugin.DEVICEKIT_BACKEND.pieces(spec, "nvrtc"))
    prog = dev.program_from_source(SRC, "scale")  # no sizes/dims: unchecked sizes, dims given at launch
    n, k = 300, 3
    x = np.linspace(-2, 2, n).astype(np.float32)
    bias = np.array([0.5, -1, 2, 0], np.float16)
    bx = dk.Buffer(dev, n, dtypes.float32).copyin(x)
    bb = dk.Buffer(dev, 4, dtypes.float16).copyin(bias)
    bo = dk.Buffer(dev, n, dtypes.float16)
    prog.execute([bx, bb, bo], [n, k], global_size=(3,), local_size=(128,))
    launch = [c for c in fake.calls if c[0] == "launch"][-1]
    assert launch[2] == (3, 1, 1) and launch[3] == (128, 1, 1) and launch[4][3:] == (n, k)
    np.testing.assert_allclose(bo.numpy().astype(np.float32), _want(x, bias, n, k).astype(np.float32), rtol=1e-3)


@pytest.mark.parametrize("src,entry,match", [
    ('extern "C" void g(float* x) {}', "g", "__global__"),
    ('extern "C" __global__ void q(float* x) {}', "nope", "found: q"),
    ('\n\nextern "C" __global__ void r(floot* x) {}', "r", "kernel.cu:3:30"),
    ('struct P { float a; }; __global__ void s(P p, float* x) {}', "s", "struct params cannot be read yet"),
    ('__global__ void fp(float* x, float (*f)(float)) {}', "fp", "function pointers cannot be passed"),
    ('template <int B> __global__ void t(float* x) {}', "t", 'a template \\(B\\): name an instantiation'),
    ('template <int B> __global__ void t(float* x) {}', "t<1, 2>", "cannot instantiate"),
    ('__global__ void v(float* x) {}', "v<4>", "not a template"),
    ('__global__ void w(float* x, int2 v) {}', "w", "vector params by value"),
])
def test_errors_say_what_is_wrong(src, entry, match):
    with pytest.raises(CompileError, match=match):
        CUDARenderer().parse_source(src, entry)


def test_body_errors_are_left_to_nvrtc():
    src = 'extern "C" __global__ void b(float* x) { x[0] = some_intrinsic_libclang_does_not_know(1); }'
    spec = CUDARenderer().parse_source(src, "b")
    assert [p.name for p in spec.params] == ["x"]


@pytest.mark.skipif(CXX is None or toolchain.nvrtc()[0] is None, reason="needs a host C++ compiler and NVRTC")
def test_cpp_linkage_scalars_first_and_dynamic_shared_on_fake_driver(monkeypatch):
    """A C++-linkage kernel taking (int, float, buffers, ...) and extern __shared__ memory: the runtime loads the
    mangled name, packs each argument as its C type in declaration order, and passes shared_bytes per launch."""
    import devicekit as dk
    from devicekit.spec import DeviceSpec
    from devicekit.targets import Device
    from devicekit_cuda import context, plugin
    src = """__global__ void shift_scale(int n, float a, const float *x, float *y, double bias) {
      extern __shared__ float stage[];
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      stage[threadIdx.x] = i < n ? x[i] : 0.0f;
      __syncthreads();
      if (i < n) y[i] = a * stage[threadIdx.x] + (float)bias;
    }"""
    fake.install(monkeypatch)
    monkeypatch.setattr(context, "_contexts", {})
    spec = CUDARenderer().parse_source(src, "shift_scale", shared_bytes="4 * 64")
    spec_dev = DeviceSpec("CUDA")
    dev = Device(spec_dev, *plugin.DEVICEKIT_BACKEND.pieces(spec_dev, "nvrtc"))
    prog = dev.program_from_source(src, "shift_scale", shared_bytes="4 * 64", global_size=("(n + 63) // 64",),
                                   local_size=(64,))
    symbol = prog.spec.get_meta("symbol")
    assert symbol == "_Z11shift_scaleifPKfPfd"
    monkeypatch.setattr(fake, "KERNELS", {symbol: host_compile_many([spec])["shift_scale"]})
    x = np.linspace(-1, 1, 100).astype(np.float32)
    y = dk.run(prog, n=100, a=3.0, x=x, y=np.zeros(100, np.float32), bias=0.5)["y"]
    np.testing.assert_allclose(y, 3 * x + 0.5, rtol=1e-6)
    launch = [c for c in fake.calls if c[0] == "launch"][-1]
    assert launch[2] == (2, 1, 1) and launch[3] == (64, 1, 1) and launch[5] == 256
    assert launch[4][:2] == (100, 3.0) and launch[4][4] == 0.5  # int, float, ptr, ptr, double as declared
