"""devicekit entry point for WebGPU (entry-point group "devicekit", name "webgpu").

Light on purpose: it imports only the core's declarations. wgpu is imported by the probe (listing devices must ask
wgpu-native which adapters exist) and by the factories, when a WEBGPU device is built.
"""

from __future__ import annotations

from devicekit.hookspecs import hookimpl
from devicekit.plugin import AllocatorFactory, CompilerPairFactory, DeviceKind, RuntimeFactoryDecl

DEVICEKIT_API = (1, 0)
KIND = "WEBGPU"


def _probe():
    from .adapters import probe
    return probe()  # its priority: 40 with a real GPU, 2 for a software adapter (lavapipe stays below CPU)


def _count() -> int:
    from .adapters import count
    return count()


def _describe(i: int) -> str:
    from .adapters import adapters, describe
    return describe(adapters()[i])


def _renderer(spec):
    from .adapters import get
    from .renderer import WGSLRenderer
    ctx = get(spec.index)
    return WGSLRenderer.from_limits(ctx.limits, ctx.features)


def _compiler(spec):
    from .compiler import WGSLCompiler
    return WGSLCompiler(spec.index)


def _allocator(spec):
    from .allocator import WebGPUAllocator
    return WebGPUAllocator(spec.index)


def _runtime(spec):
    from .runtime import factory
    return factory(spec)


@hookimpl
def devicekit_device_kinds():
    return [DeviceKind(KIND, "WebGPU adapter: WGSL -> wgpu's compiler (naga) -> compute pipelines, via wgpu-py",
                       priority=2, probe=_probe, count=_count, describe_id=_describe, memo=True)]


@hookimpl
def devicekit_allocator(spec):
    return AllocatorFactory(_allocator, priority=0) if spec.kind == KIND else None


@hookimpl
def devicekit_compiler_pairs(spec):
    return [CompilerPairFactory("wgsl", _renderer, _compiler, priority=10)] if spec.kind == KIND else []


@hookimpl
def devicekit_runtime_factory(spec):
    return RuntimeFactoryDecl(_runtime, priority=0) if spec.kind == KIND else None
