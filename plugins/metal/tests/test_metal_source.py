"""Hand-written Metal kernels: MetalRenderer.parse_source reads the signature (libclang + shim); the host emulation
runs them with their builtins; dk.target("METAL") / dev.program_from_source use it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from devicekit.errors import CompileError
from devicekit.ir import dtypes
from devicekit_metal.hostcheck import HostKernel, cxx, libclang_available
from devicekit_metal.renderer import MetalRenderer

warnings.filterwarnings("ignore", message=".*plugin.*")
pytestmark = pytest.mark.skipif(libclang_available() is not None, reason=str(libclang_available()))

SAXPY = """#include <metal_stdlib>
using namespace metal;
kernel void saxpy(device const float *x [[buffer(0)]], device float *y [[buffer(1)]],
                  constant long& n [[buffer(2)]], constant int& a [[buffer(3)]],
                  uint i [[thread_position_in_grid]]) {
  if ((long)i < n) y[i] = (float)a * x[i] + y[i];
}
"""

SCAN = """#include <metal_stdlib>
using namespace metal;
kernel void block_scan(device const half *x [[buffer(0)]], device float *out [[buffer(1)]],
                       uint2 tg [[threadgroup_position_in_grid]], ushort t [[thread_index_in_threadgroup]],
                       uint3 tpg [[threads_per_threadgroup]]) {
  threadgroup float buf[64];
  uint base = tg.x * tpg.x;
  buf[t] = (float)x[base + t];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float s = 0.0f;
  for (ushort k = 0; k <= t; k++) s += buf[k];
  out[base + t] = s;
}
"""


def test_parse_signature():
    spec = MetalRenderer().parse_source(SAXPY, "saxpy", sizes={"x": "n", "y": "n"}, global_size=("(n+63)//64",),
                                        local_size=(64,))
    assert [(p.name, p.dtype, p.writable) for p in spec.params] == [("x", dtypes.float32, False),
                                                                    ("y", dtypes.float32, True)]
    assert [v.name for v in spec.vars] == ["n", "a"]
    assert spec.vars[1].hi == 2**31 - 1
    assert spec.launch_dims({"n": 100, "a": 1}) == ((2,), (64,))
    assert spec.lang == "metal" and spec.device == "METAL"


@pytest.mark.skipif(cxx() is None, reason="no C++ compiler for the host emulation")
def test_hand_written_kernel_runs_on_host(tmp_path):
    spec = MetalRenderer().parse_source(SAXPY, "saxpy", sizes={"x": "n", "y": "n"}, global_size=("(n+63)//64",),
                                        local_size=(64,))
    x, y = np.arange(100, dtype=np.float32), np.ones(100, dtype=np.float32)
    HostKernel(spec, MetalRenderer(), workdir=str(tmp_path)).run([x, y], [100, 3])
    np.testing.assert_allclose(y, 3 * np.arange(100) + 1)


@pytest.mark.skipif(cxx() is None, reason="no C++ compiler for the host emulation")
def test_barrier_kernel_with_builtins_runs_threaded(tmp_path):
    spec = MetalRenderer().parse_source(SCAN, "block_scan", global_size=(3,), local_size=(64,))
    x = np.random.default_rng(0).standard_normal(192).astype(np.float16)
    out = np.zeros(192, np.float32)
    HostKernel(spec, MetalRenderer(), workdir=str(tmp_path)).run([x, out], [])
    want = np.cumsum(x.astype(np.float32).reshape(3, 64), axis=1).reshape(-1)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("src,match", [
    (SAXPY.replace("[[buffer(1)]]", "[[buffer(0)]]"), r"'y' and 'x' are both \[\[buffer\(0\)\]\]"),
    (SAXPY.replace("uint i [[thread_position_in_grid]]", "uint i"), "builtin attribute"),
    (SAXPY.replace("device float *y", "device floot *y"), "kernel.metal.cpp:3:.*unknown type name 'floot'"),
    (SAXPY.replace("constant int& a", "constant int* a"), None),  # a read-only buffer: fine
    (SAXPY.replace("constant int& a [[buffer(3)]]", "threadgroup float* a [[buffer(3)]]"), "is `device T"),
    (SAXPY.replace("constant int& a [[buffer(3)]]", "device float* a [[threadgroup(0)]]"), "is `threadgroup T"),
    (SAXPY.replace("kernel void saxpy", "kernel void other"), "no kernel named 'saxpy'"),
    (SAXPY.replace("[[buffer(3)]]", "[[buffer(31)]]"), r"'a' is \[\[buffer\(31\)\]\]; Metal has buffer slots 0..30"),
    (SAXPY.replace("constant int& a", "constant double& a"), "param 'a': Metal has no double"),
])
def test_bad_sources_are_explained(src, match):
    if match is None:
        assert MetalRenderer().parse_source(src, "saxpy").params[2].writable is False
        return
    with pytest.raises(CompileError, match=match):
        MetalRenderer().parse_source(src, "saxpy")


def test_target_program_from_source_path():
    import devicekit as dk
    t = dk.target("METAL")
    spec = t.renderer.parse_source(SAXPY, "saxpy", sizes={"x": "n", "y": "n"})
    assert spec.get_meta("from_source")


@pytest.mark.skipif(cxx() is None, reason="no C++ compiler for the host emulation")
def test_common_metal_functions_and_headers(tmp_path):
    src = """#include <metal_stdlib>
#include <metal_math>
using namespace metal;
kernel void act(device const float *x [[buffer(0)]], device float *y [[buffer(1)]], constant uint& n [[buffer(2)]],
                uint3 tid [[thread_position_in_grid]]) {
  uint i = tid.x;
  if (i >= n) return;
  y[i] = clamp(max(x[i], 0.0f) + fast::exp2(min(x[i], 0.0f)) * abs(x[i]), -4.0f, 4.0f) + fma(x[i], 2.0f, 1.0f);
}
"""
    spec = MetalRenderer().parse_source(src, "act", sizes={"x": "n", "y": "n"}, global_size=(2,), local_size=(32,))
    x = np.linspace(-3, 3, 50).astype(np.float32)
    y = np.zeros(50, np.float32)
    HostKernel(spec, MetalRenderer(), workdir=str(tmp_path)).run([x, y], [50])
    want = np.clip(np.maximum(x, 0) + np.exp2(np.minimum(x, 0)) * np.abs(x), -4, 4) + (x * 2 + 1)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
