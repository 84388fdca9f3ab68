"""devicekit entry point for WebGPU (entry-point group "devicekit", name "webgpu").

Light on purpose: it imports only the core's declarations. wgpu is imported by the probe (listing devices must ask
wgpu-native which adapters exist) and by the factories, when a WEBGPU device is built.
"""

from __future__ import annotations

from devicekit.backend import Backend, Pair

DEVICEKIT_API = (1, 0)


def _describe(i: int) -> str:
    from .adapters import adapters, describe
    return describe(adapters()[i])


def _renderer(spec):
    """The renderer sized by the adapter's own limits and features."""
    from .adapters import get
    from .renderer import WGSLRenderer
    ctx = get(spec.index)
    return WGSLRenderer.from_limits(ctx.limits, ctx.features)


DEVICEKIT_BACKEND = Backend(
    "WEBGPU", "WebGPU adapter: WGSL -> wgpu's compiler (naga) -> compute pipelines, via wgpu-py", priority=2,
    probe="devicekit_webgpu.adapters:probe",  # priority 40 with a real GPU, 2 for a software adapter (below CPU)
    count="devicekit_webgpu.adapters:count", describe_id=_describe, memo=True,
    pairs=[Pair("wgsl", _renderer, "devicekit_webgpu.compiler:WGSLCompiler(spec.index)", 10)],
    allocator="devicekit_webgpu.allocator:WebGPUAllocator(spec.index)",
    runtime="devicekit_webgpu.runtime:factory",
)
