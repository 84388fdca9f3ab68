"""CUDARenderer: the source it emits (signature, GPU indices, shared memory, barriers, half/bf16, vectors) and its
limits. Compiling it is covered by test_cuda_compile.py, running it by test_cuda_emulation.py."""

from __future__ import annotations

import os
import pickle
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cuda_kernels as ck
from devicekit import ir
from devicekit.ir.dtypes import dtypes
from devicekit.ir.linearize import LinearKernel
from devicekit.ir.ops import Ops
from devicekit.ir.uop import KernelError, UOp
from devicekit.render.program_spec import ParamSpec, ProgramSpec
from devicekit_cuda.renderer import CUDARenderer


def _saxpy():
    k = ir.KernelBuilder("saxpy")
    n = k.var("n", lo=1, hi=2**31 - 1)
    x, y = k.param("x", dtypes.float32, size=n), k.param("y", dtypes.float32, size=n)
    out = k.param("out", dtypes.float32, size=n, writable=True)
    i = k.range(n, kind="global")
    out[i] = x[i] * 2.0 + y[i]
    return k.build()


def test_signature_and_indices():
    spec = CUDARenderer().render(_saxpy())
    assert spec.device == "CUDA" and spec.lang == "cuda"
    assert 'extern "C" __global__ void __launch_bounds__(256) dku_saxpy(' in spec.src  # user names: dku_<name>
    assert "const float *__restrict__ dku_x" in spec.src and "float *__restrict__ dku_out" in spec.src
    assert "long long dku_n)" in spec.src and spec.entry == "dku_saxpy" and spec.name == "saxpy"
    assert "blockIdx.x" in spec.src and "threadIdx.x" in spec.src
    assert "cuda_fp16.h" not in spec.src and "cuda_bf16.h" not in spec.src


def test_launch_dims_are_symbolic():
    spec = CUDARenderer().render(_saxpy())
    assert spec.launch_dims({"n": 1000}) == ((4,), (256,))
    assert spec.launch_dims({"n": 256}) == ((1,), (256,))
    assert spec.launch_dims({"n": 257}) == ((2,), (256,))


def test_2d_grid_uses_y_axis():
    _, kern, _ = ck.structure_kernels()[0]
    spec = CUDARenderer().render(kern)
    assert "blockIdx.y" in spec.src
    assert spec.launch_dims({"m": 37, "n": 53}) == ((1, 53), (256, 1))


def test_shared_memory_and_barrier():
    _, kern, _ = ck.local_kernels()[0]
    spec = CUDARenderer().render(kern)
    assert "__shared__ __align__(16) float dku_smem[64];" in spec.src
    assert "__syncthreads();" in spec.src
    assert "__launch_bounds__(64)" in spec.src
    assert spec.get_meta("shared_bytes") == 256


@pytest.mark.parametrize("dt,header", [(dtypes.float16, "cuda_fp16.h"), (dtypes.bfloat16, "cuda_bf16.h")])
def test_half_headers_and_float_math(dt, header):
    _, kern, _ = ck.elementwise(dt, lambda a, b: ir.exp2(a) * b, f"h_{dt.name}")
    src = CUDARenderer().render(kern).src
    assert f"#include <{header}>" in src
    assert "exp2f(((float)(" in src or "exp2f((float)(" in src  # half math runs in float, rounded once


def test_limits_declared():
    r = CUDARenderer()
    caps = r.capabilities
    assert caps.gpu_indexing and caps.has_local
    assert caps.shared_max == 49152
    assert caps.local_max == (1024, 1024, 64) and caps.global_max == (2**31 - 1, 65535, 65535)
    assert caps.max_buffers and caps.max_buffers >= 64
    assert set(dtypes.all()) <= set(caps.dtypes)
    assert {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.MULACC, Ops.MAX} <= caps.ops


def test_too_much_shared_memory_is_refused():
    k = ir.KernelBuilder("big_smem")
    o = k.param("o", dtypes.float32, size=64, writable=True)
    s = k.local("s", dtypes.float32, 49152 // 4 + 1)
    k.range(1, kind="global")
    t = k.range(64, kind="local")
    s[t] = t.cast(dtypes.float32)
    k.barrier()
    o[t] = s[63 - t]
    with pytest.raises(KernelError, match=r"kernel 'big_smem' declares 49156 bytes of local memory .*at most 49152"):
        CUDARenderer().render(k.build())


def test_too_many_threads_is_refused():
    k = ir.KernelBuilder("big_block")
    o = k.param("o", dtypes.float32, size=2048, writable=True)
    t = k.range(2048, kind="local")
    o[t] = t.cast(dtypes.float32)
    with pytest.raises(KernelError, match=r"kernel 'big_block' launches 2048 threads .*at most 1024"):
        CUDARenderer().render(k.build())


def test_picklable():
    r = pickle.loads(pickle.dumps(CUDARenderer("sm_80")))
    assert isinstance(r, CUDARenderer) and r.arch == "sm_80"


def test_special_values_spelled():
    _, kern, _ = ck.elementwise(dtypes.float32, lambda a, b: ir.maximum(a, b * 0.0 + float("inf")), "infk")
    src = CUDARenderer().render(kern).src
    assert "INFINITY" in src and "#define INFINITY (__int_as_float(0x7f800000))" in src


# ---- vectors: the lowering scalarizes today, so a linear kernel with vector loads, ALU, math, casts, bitcasts,
# gep and stores is built by hand (docs/linear-form.md) to check the renderer's vector path.

def vector_linear_kernel():
    f32, v4 = dtypes.float32, dtypes.float32.vec(4)
    idx = dtypes.index
    px = UOp(Ops.PARAM, f32, (), (0, "x", False))
    po = UOp(Ops.PARAM, f32, (), (1, "o", True))
    pb = UOp(Ops.PARAM, f32, (), (2, "b", True))
    pg = UOp(Ops.PARAM, f32, (), (3, "g", True))
    g = UOp(Ops.SPECIAL, idx, (UOp.const(idx, 4),), ("gidx0", 0))
    lane = UOp(Ops.SPECIAL, idx, (UOp.const(idx, 8),), ("lidx0", 0))
    tid = UOp(Ops.ADD, idx, (UOp(Ops.MUL, idx, (g, UOp.const(idx, 8))), lane))
    base = UOp(Ops.MUL, idx, (tid, UOp.const(idx, 4)))
    v = UOp(Ops.LOAD, v4, (UOp(Ops.INDEX, f32, (px, base)),))
    two = UOp(Ops.VECTORIZE, v4, (UOp.const(f32, 2.0),) * 4)
    w = UOp(Ops.ADD, v4, (UOp(Ops.MUL, v4, (v, two)), v))
    e = UOp(Ops.EXP2, v4, (w,))
    c = UOp(Ops.CMPLT, dtypes.bool.vec(4), (v, two))
    s = UOp(Ops.WHERE, v4, (c, e, v))
    h = UOp(Ops.CAST, dtypes.float16.vec(4), (s,))
    back = UOp(Ops.CAST, v4, (h,))
    st1 = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, f32, (po, base)), back))
    bits = UOp(Ops.BITCAST, dtypes.uint32.vec(4), (v,))
    mask = UOp(Ops.VECTORIZE, dtypes.uint32.vec(4), (UOp.const(dtypes.uint32, 0x7FFFFFFF),) * 4)
    absv = UOp(Ops.BITCAST, v4, (UOp(Ops.AND, dtypes.uint32.vec(4), (bits, mask)),))
    st2 = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, f32, (pb, base)), absv))
    st3 = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, f32, (pg, tid)), UOp(Ops.GEP, f32, (s,), 2)))
    uops = [u for u in UOp(Ops.SINK, dtypes.void, (st1, st2, st3)).toposort() if u.op is not Ops.SINK]
    params = (ParamSpec("x", f32, 128, False), ParamSpec("o", f32, 128, True), ParamSpec("b", f32, 128, True),
              ParamSpec("g", f32, 32, True))
    return LinearKernel("vecops", params, (), uops, (4,), (8,), None, (1, 2, 3), (0,))


def vector_reference(x):
    v = x.reshape(32, 4)
    s = np.where(v < 2, np.exp2(v * 2 + v), v)
    o = s.astype(np.float16).astype(np.float32)
    return {"o": o.reshape(-1), "b": np.abs(x), "g": s[:, 2]}


def test_vector_source():
    src = CUDARenderer().render_linear(vector_linear_kernel(), "vecops")
    assert "struct __align__(16) dk_float32x4 { float v[4]; };" in src
    assert "struct __align__(8) dk_float16x4 { half v[4]; };" in src
    assert "*((dk_float32x4*)(dku_x+" in src
    assert "dk_map<dk_float32x4>" in src and "dk_bitcast<dk_uint32x4>" in src


def test_vector_kernel_emulated():
    from cuda_host_emu import CXX, HostKernel, host_compile_many  # noqa: F401
    if CXX is None:
        pytest.skip("no host C++ compiler")
    import ctypes
    import hashlib
    import subprocess

    import cuda_host_emu as emu
    r = CUDARenderer()
    lk = vector_linear_kernel()
    src = r.render_linear(lk, "vecops")
    spec = ProgramSpec("vecops", src, "CUDA", "cuda", lk.params, (), (4,), (8,))
    body = emu._PRELUDE + f"namespace dk_k0 {{\n{src}\n}}\n" + (
        'extern "C" void dk_launch_0(void** bufs, const long long* vars, const long long* g, const long long* l, '
        "int threaded) { dk_run([&]() { dk_k0::vecops((float*)bufs[0], (float*)bufs[1], (float*)bufs[2], "
        "(float*)bufs[3]); }, g, l, threaded); }\n")
    h = hashlib.sha256(body.encode()).hexdigest()[:16]
    cpp, so = os.path.join(emu._BUILD, f"v{h}.cpp"), os.path.join(emu._BUILD, f"v{h}.so")
    with open(cpp, "w") as f:
        f.write(body)
    r_ = subprocess.run([emu.CXX, "-std=c++20", "-O1", "-shared", "-fPIC", "-w", "-pthread", "-I", emu.INCLUDE,
                         "-include", os.path.join(emu.INCLUDE, "cuda_host_shim.h"), cpp, "-o", so],
                        check=False, capture_output=True, text=True)
    assert r_.returncode == 0, r_.stderr
    hk = HostKernel(spec, ctypes.CDLL(so), "dk_launch_0")
    x = np.linspace(-3, 3, 128).astype(np.float32)
    got = hk(x=x)
    want = vector_reference(x)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=2e-6, err_msg=k)


def test_reserved_user_names_are_renamed():
    """Params/vars named like CUDA built-ins, C++ keywords, math functions or our helpers still compile and run."""
    import devicekit as dk
    from cuda_host_emu import CXX, host_compile
    k = ir.KernelBuilder("names")
    n = k.var("sin", lo=1, hi=4096)
    m = k.var("threadIdx", lo=0, hi=10)
    a = k.param("blockIdx", dtypes.float32, size=n)
    b = k.param("dk_map", dtypes.float32, size=n)
    o = k.param("and", dtypes.float32, size=n, writable=True)
    i = k.range(n, kind="global")
    o[i] = ir.sin(a[i]) + b[i] * m.cast(dtypes.float32)
    kern = k.build()
    spec = CUDARenderer().render(kern)
    assert [v.name for v in spec.vars] == ["sin", "threadIdx"]  # the signature keeps the user's names
    assert "long long dku_sin" in spec.src and "float *__restrict__ dku_blockIdx" in spec.src
    if CXX is None:
        pytest.skip("no host C++ compiler")
    inp = {"blockIdx": np.arange(10, dtype=np.float32), "dk_map": np.ones(10, np.float32), "sin": 10, "threadIdx": 3}
    np.testing.assert_allclose(host_compile(kern)(**inp)["and"], dk.run(kern, device="PYTHON", **inp)["and"],
                               rtol=1e-6)
