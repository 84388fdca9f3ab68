"""Run-time bounds checks on CUDA without a GPU: the checked gather compiles with NVRTC, and the CUDA-rendered source
run on the host (cuda_host_emu) guards the access and fills the hidden record the core turns into IndexError."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from devicekit import ir
from devicekit.ir.dtypes import dtypes
from devicekit.testing.conformance import gather_kernel
from devicekit_cuda import toolchain
from devicekit_cuda.renderer import CUDARenderer


def _gather(**build) -> ir.Kernel:
    return gather_kernel("gather", dtypes.int64, **build)


def test_checked_gather_renders_the_hidden_buffer():
    spec = CUDARenderer().render(_gather())
    assert spec.checks is not None and spec.params[-1].name == "dk_bounds"
    assert [p.name for p in spec.user_params] == ["x", "idx", "out"]
    assert "dk_bounds" not in CUDARenderer().render(_gather(checked=False)).src


@pytest.mark.skipif(toolchain.nvrtc()[0] is None, reason="NVRTC not found (pip install nvidia-cuda-nvrtc)")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_checked_gather_compiles_with_nvrtc(arch):
    from devicekit_cuda.compiler import CUDACompiler
    from devicekit_cuda.cubin import inspect
    spec = CUDARenderer().render(_gather())
    lib = CUDACompiler(arch).compile(spec).lib
    assert inspect(lib).arch == arch


def test_host_emulation_guards_and_records():
    from cuda_host_emu import CXX, host_compile
    if CXX is None:
        pytest.skip("no host C++ compiler for the emulation")
    hk = host_compile(_gather())
    x = np.arange(10, dtype=np.float32)
    idx = np.array([1, 10**9, 3, -1, 9] * 100, dtype=np.int64)  # 500 lanes: two blocks, a guard
    got = hk(x=x, idx=idx, n=len(idx), m=10)
    np.testing.assert_array_equal(got["out"], np.where((idx >= 0) & (idx < 10), x[np.clip(idx, 0, 9)], 0))
    err = hk.spec.checks.error(got["dk_bounds"], [10, len(idx), len(idx), 2], {"n": len(idx), "m": 10})
    assert isinstance(err, IndexError)
    assert str(err).startswith("kernel gather: access to x[") and ("[1000000000]" in str(err) or "[-1]" in str(err))
    clean = hk(x=x, idx=np.array([1, 2, 3], dtype=np.int64), n=3, m=10)
    assert not clean["dk_bounds"].any()
