"""CUDA-rendered kernels compiled as C++ for the host (cuda_host_emu) and run against the PYTHON reference device.

This checks the renderer's semantics (index mapping, guards, wrap-around ints, half/bfloat16 through float, casts,
bitcasts, vectors, shared memory + barriers) without a GPU. NVRTC's own math precision is not covered here: the
device functions used (exp2f, log2f, sinf, sqrtf, IEEE division with --prec-div) are within the tolerances below.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cuda_kernels as ck
import devicekit as dk
from cuda_host_emu import CXX, host_compile_many
from devicekit import settings

pytestmark = pytest.mark.skipif(CXX is None, reason="no host C++ compiler (g++/clang++) for the emulation tests")

# relative / absolute tolerance by result dtype (integers and bools must match exactly)
TOL = {"float32": (2e-6, 1e-6), "float64": (1e-12, 1e-12), "float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2)}


def _compare(name, got, want, dt_name):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{name}: shape {got.shape} vs {want.shape}"
    if dt_name in TOL:
        rtol, atol = TOL[dt_name]
        with np.errstate(invalid="ignore"):
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True, err_msg=name)
    else:
        np.testing.assert_array_equal(got, want, err_msg=name)


_GROUPS = {
    "float": ck.float_kernels, "int": ck.int_kernels, "cast": lambda: ck.cast_kernels() + ck.bitcast_kernels(),
    "structure": ck.structure_kernels, "reduce": ck.reduce_kernels, "local": ck.local_kernels,
    "random": lambda: [ck.random_kernel(s) for s in range(N_RANDOM)],
    "library": ck.library_kernels,
    "core_random": lambda: ck.core_random_kernels(range(N_CORE_RANDOM)),
}
# the random kernels in CI: half of each campaign (each group is one host library, the core's 150 took 5-7 s of a
# worker with their PYTHON references); every one with DEVICEKIT_SLOW=1
N_CORE_RANDOM = 150 if settings.get("DEVICEKIT_SLOW") else 75
N_RANDOM = 60 if settings.get("DEVICEKIT_SLOW") else 30
_built: dict[str, dict] = {}


def _host(group: str, name: str):
    """All kernels of a group are built into one host library, once."""
    if group not in _built:
        _built[group] = host_compile_many([k for _, k, _ in _GROUPS[group]()])
    return _built[group][name]


def _host_name(group, name):
    return name


def _check(name, kernel, inputs, group):
    want = dk.run(kernel, device="PYTHON", **inputs)
    got = _host(group, kernel.name)(**inputs)
    dts = {p.name: p.dtype.name for p in kernel.params}
    for out, arr in want.items():
        _compare(f"{name}.{out}", got[out].reshape(-1), np.asarray(arr).reshape(-1), dts[out])


def _params(kernels):
    return [pytest.param(kern, inputs, id=name) for name, kern, inputs in kernels]


@pytest.mark.parametrize("kernel,inputs", _params(ck.float_kernels()))
def test_float_kernels(kernel, inputs):
    _check(kernel.name, kernel, inputs, "float")


@pytest.mark.parametrize("kernel,inputs", _params(ck.int_kernels()))
def test_int_kernels(kernel, inputs):
    _check(kernel.name, kernel, inputs, "int")


@pytest.mark.parametrize("kernel,inputs", _params(ck.cast_kernels() + ck.bitcast_kernels()))
def test_casts(kernel, inputs):
    _check(kernel.name, kernel, inputs, "cast")


@pytest.mark.parametrize("kernel,inputs", _params(ck.structure_kernels()))
def test_structure(kernel, inputs):
    _check(kernel.name, kernel, inputs, "structure")


@pytest.mark.parametrize("kernel,inputs", _params(ck.reduce_kernels()))
def test_reductions(kernel, inputs):
    _check(kernel.name, kernel, inputs, "reduce")


@pytest.mark.parametrize("kernel,inputs", _params(ck.local_kernels()))
def test_shared_memory_and_barriers(kernel, inputs):
    assert "__syncthreads();" in _host("local", kernel.name).spec.src
    _check(kernel.name, kernel, inputs, "local")


@pytest.mark.parametrize("seed", range(N_RANDOM))
def test_random_kernels(seed):
    name, kernel, inputs = ck.random_kernel(seed)
    _check(name, kernel, inputs, "random")


@pytest.mark.parametrize("kernel,inputs", _params(ck.library_kernels()))
def test_library_kernels(kernel, inputs):
    """Every kernel of devicekit.kernels (elementwise, reduce, softmax, transpose, matmul, mlp)."""
    _check(kernel.name, kernel, inputs, "library")


@pytest.mark.parametrize("kernel,inputs", _params(ck.core_random_kernels(range(N_CORE_RANDOM))))
def test_core_random_kernels(kernel, inputs):
    """The core's random kernels: every dtype, gated loads, reductions, division by zero, shifts of any amount."""
    _check(kernel.name, kernel, inputs, "core_random")


@pytest.mark.parametrize("dt_name", ["int8", "int16", "int32", "int64"])
def test_signed_overflow_wraps_without_undefined_behaviour(dt_name):
    """The conformance kit's `x < x + 1` at the type's maximum (False: the IR's ints wrap). The emulation compiles
    without -fwrapv and with UBSan, so a signed operation the renderer leaves to C++ fails here, as NVRTC 13.0 on an
    H200 made int64's plain arithmetic fold to True."""
    from cuda_host_emu import host_compile
    from devicekit.testing.test_conformance_contract import _overflow_kernel
    info = np.iinfo(dt_name)
    x = np.array([info.max, info.max - 1, info.min, -1, 0, 1], dtype=dt_name)
    kernel = _overflow_kernel(dt_name)
    inputs = {"x": x, "n": len(x), "lt": np.zeros(len(x), bool), "s": np.zeros(len(x), dt_name)}
    want = dk.run(kernel, device="PYTHON", **inputs)
    got = host_compile(kernel)(**inputs)
    for out in ("lt", "s"):
        np.testing.assert_array_equal(got[out].reshape(-1), np.asarray(want[out]).reshape(-1), err_msg=out)
    assert not got["lt"][0]


@pytest.mark.parametrize("name", [n for n, _ in ck.GPU_FINDINGS])
def test_gpu_findings_match_in_emulation(name):
    """The CUDA source of each GPU finding is right as C++ (the difference was NVRTC's or the GPU's)."""
    from cuda_host_emu import host_compile
    kernel, inputs = dict(ck.GPU_FINDINGS)[name]()
    want = dk.run(kernel, device="PYTHON", **inputs)
    got = host_compile(kernel)(**inputs)
    for out, arr in want.items():
        np.testing.assert_array_equal(got[out].reshape(-1), np.asarray(arr).reshape(-1), err_msg=f"{name}.{out}")
