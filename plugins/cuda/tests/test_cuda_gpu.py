"""GPU tests: run on a machine with an NVIDIA driver, a device and pycuda (`pip install 'devicekit-cuda[runtime]'`).
Everywhere else they skip with the probe's reason. `plugins/cuda/gpu_check.sh` runs them with a benchmark."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cuda_kernels as ck
import devicekit as dk
from devicekit.ir.dtypes import dtypes
from devicekit_cuda.probe import count, runtime_status

_status = runtime_status()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _status.ok, reason=f"no CUDA device: {_status.reason}")]

def _check(kernel, inputs, device="CUDA"):
    """Against the PYTHON reference, with the core's stated tolerances (devicekit.testing.random_kernels)."""
    from devicekit.testing.random_kernels import assert_matches
    want = dk.run(kernel, device="PYTHON", **inputs)
    got = dk.run(kernel, device=device, **inputs)
    dts = {p.name: p.dtype for p in kernel.params}
    for name, arr in want.items():
        assert_matches(np.asarray(got[name]).reshape(-1), np.asarray(arr).reshape(-1), dts[name],
                       f"{kernel.name}.{name} on {device}")


ALL = [*ck.float_kernels(), *ck.int_kernels(), *ck.cast_kernels(), *ck.bitcast_kernels(), *ck.structure_kernels(),
       *ck.reduce_kernels(), *ck.local_kernels(), *[ck.random_kernel(s) for s in range(60)], *ck.library_kernels(),
       *ck.core_random_kernels(range(300))]


@pytest.mark.parametrize("kernel,inputs", [pytest.param(k, i, id=n) for n, k, i in ALL])
def test_matches_reference(kernel, inputs):
    _check(kernel, inputs)


def test_device_shape():
    dev = dk.device("CUDA")
    assert dev.base_device_key == "CUDA"
    assert dev.pair_names[0] == "nvrtc"
    from devicekit_cuda.context import get
    assert dev.compiler.arch == get(0).arch  # compiled for the device's own arch


def test_buffers_roundtrip_and_views():
    dev = dk.device("CUDA")
    x = np.arange(1000, dtype=np.float32)
    buf = dk.Buffer(dev, 1000, dtypes.float32).copyin(x)
    np.testing.assert_array_equal(buf.numpy(), x)
    view = buf.view(100, dtypes.float32, 500)
    np.testing.assert_array_equal(view.numpy(), x[500:600])


def test_timed_launch_returns_seconds():
    dev = dk.device("CUDA")
    _, kern, inputs = ck.float_kernels()[0]
    prog = dev.compile(kern)
    n = inputs["n"]
    bufs = [dk.Buffer(dev, n, dtypes.float32).copyin(inputs["x0"]), dk.Buffer(dev, n, dtypes.float32).copyin(inputs["x1"]),
            dk.Buffer(dev, n, dtypes.float32)]
    t = prog.execute(bufs, [n], wait=True)
    assert isinstance(t, float) and 0 < t < 1.0


def test_threads_share_a_device():
    _, kern, inputs = ck.structure_kernels()[0]
    errors = []

    def work():
        try:
            for _ in range(5):
                _check(kern, inputs)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


@pytest.mark.skipif(count() < 2, reason="needs two CUDA devices")
def test_second_device_reuses_compiled_bytes():
    _, kern, inputs = ck.float_kernels()[0]
    a = dk.device("CUDA").compile(kern)
    b = dk.device("CUDA:1").compile(kern)
    assert a.compiled.lib == b.compiled.lib
    _check(kern, inputs, device="CUDA:1")


@pytest.mark.parametrize("name", [n for n, _ in ck.GPU_FINDINGS])
def test_gpu_findings(name):
    """Findings of the fuzzer on a real GPU that the host emulation does not reproduce (cuda_kernels.GPU_FINDINGS)."""
    kernel, inputs = dict(ck.GPU_FINDINGS)[name]()
    _check(kernel, inputs)
