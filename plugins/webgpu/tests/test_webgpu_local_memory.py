"""Workgroup memory on WEBGPU: WebGPU guarantees 16 KB (maxComputeWorkgroupStorageSize), lavapipe 32 KB. The bench's
user-called `kernels.matmul(1024, 1024, 1024)` once declared a 256 KB local array (b_panels) there; the library's
kernels must fit the target's `Capabilities.shared_max`, which the core checks in one place (render/prepare.py)."""

from __future__ import annotations

import pytest
from devicekit import ir, kernels
from devicekit.ir import dtypes
from devicekit.ir.uop import KernelError


def _local_bytes(program) -> int:
    """Bytes of the var<workgroup> arrays in the WGSL a program was compiled to."""
    import re
    src = bytes(program.compiled.lib).decode()
    sizes = {"f32": 4, "i32": 4, "u32": 4, "f16": 2, "bool": 4}
    return sum(sizes[t] * int(n) for t, n in re.findall(r"var<workgroup> \w+: array<(\w+), (\d+)>", src))


@pytest.mark.parametrize("how", ["as a user calls it", "device=WEBGPU", "panels"])
def test_library_matmul_fits_workgroup_memory(wg_device, how, monkeypatch):
    """As a user calls it: a user whose default device is WEBGPU (a kernel built without `device=` is the default
    device's: for a CPU, the matmul packs b into a 256 KB local array)."""
    monkeypatch.setenv("DEVICEKIT_DEVICE", "WEBGPU")
    kw = {"as a user calls it": {}, "device=WEBGPU": {"device": wg_device},
          "panels": {"b_layout": "panels", "device": wg_device}}[how]
    p = wg_device.compile(kernels.matmul(1024, 1024, 1024, **kw))  # a KernelError (render.prepare) if over
    assert _local_bytes(p) <= wg_device.renderer.capabilities.shared_max


def test_local_array_over_the_adapter_limit_is_refused_by_name(wg_device):
    """What the bench saw: a kernel declaring 256 KB of workgroup memory is one KernelError naming the limit."""
    k = ir.KernelBuilder("big_local")
    out = k.param("out", dtypes.float32, 64, writable=True)
    s = k.local("b_panels", dtypes.float32, 65536)
    i = k.range(64, "global")
    s[i] = i.cast(dtypes.float32)
    k.barrier()
    out[i] = s[i]
    with pytest.raises(KernelError, match=r"262144 bytes of local memory.*shared_max"):
        wg_device.compile(k.build())
