"""Hostile user names on CUDA (issue 11, item 4): kernels whose kernel, param, var and shared-array names are C++
keywords, CUDA built-ins (threadIdx, __global__), math functions, macros or the renderers' temporaries compile with
NVRTC to a cubin that defines the entry symbol the runtime looks up, and run under the host emulation like PYTHON.
CI: devicekit.testing.names.name_sets() with a shared array on every other case; DEVICEKIT_SLOW=1: every name in
every role."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import devicekit as dk
from cuda_host_emu import CXX, host_compile_many
from devicekit import settings
from devicekit.ir.names import mangle
from devicekit.testing.names import hostile_kernel, name_sets
from devicekit.testing.random_kernels import assert_matches
from devicekit_cuda import toolchain
from devicekit_cuda.cubin import inspect
from devicekit_cuda.renderer import CUDARenderer

SLOW = settings.get("DEVICEKIT_SLOW")
CASES = [(kname, args, i % 2 == 1) for i, (kname, args) in enumerate(name_sets(5, None if SLOW else (0, 1, 2)))]
_have_nvrtc = toolchain.nvrtc()[0] is not None


def _kernels():
    return [hostile_kernel(args, kname, local=local) for kname, args, local in CASES]


@pytest.mark.skipif(not _have_nvrtc, reason="NVRTC not found (pip install nvidia-cuda-nvrtc)")
def test_hostile_names_compile_with_nvrtc_and_define_the_entry():
    from devicekit_cuda.compiler import CUDACompiler
    comp = CUDACompiler("sm_80", "nvjitlink")
    sample = _kernels() if SLOW else _kernels()[::4]  # NVRTC takes ~0.2 s a kernel: a quarter of the cases in CI
    for kernel, _ in sample:
        spec = CUDARenderer().render(kernel)
        assert spec.entry == mangle(kernel.name) and spec.name == kernel.name
        info = inspect(comp.compile_src(spec.src))
        assert spec.entry in info.functions, (kernel.name, info.functions)


@pytest.mark.skipif(CXX is None, reason="no host C++ compiler for the emulation")
def test_hostile_names_run_like_python_under_host_emulation():
    made = _kernels()
    host = host_compile_many([k for k, _ in made])  # one g++ run for all of them
    for kernel, inputs in made:
        want = dk.run(kernel, "PYTHON", **inputs)
        got = host[kernel.name](**inputs)
        out = next(p for p in kernel.params if p.writable)
        assert_matches(got[out.name].reshape(-1), np.asarray(want[out.name]).reshape(-1), out.dtype,
                       f"{kernel.name}{[p.name for p in kernel.params]}")
