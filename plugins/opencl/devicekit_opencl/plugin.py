"""devicekit entry point for OpenCL (entry-point group "devicekit", name "opencl").

Light on purpose: it imports only the core's declarations. pyopencl is imported by the probe (listing devices must
ask the ICD loader what exists) and by the factories, when an OPENCL device is built.
"""

from __future__ import annotations

from devicekit.hookspecs import hookimpl
from devicekit.plugin import AllocatorFactory, CompilerPairFactory, DeviceKind, RuntimeFactoryDecl

from . import settings as _settings  # noqa: F401 - declares DEVICEKIT_OPENCL_* (devicekit info shows them)

DEVICEKIT_API = (1, 0)
KIND = "OPENCL"


def _probe():
    from .platform import probe
    return probe()  # its priority: 40 with a GPU, 2 otherwise (PoCL on the host CPU stays below CPU)


def _count() -> int:
    from .platform import count
    return count()


def _renderer(spec):
    from .context import get
    from .renderer import OpenCLRenderer
    return OpenCLRenderer.from_device(get(spec.index).device)


def _compiler(spec):
    from .compiler import OpenCLCompiler
    return OpenCLCompiler(spec.index)


def _allocator(spec):
    from .allocator import OpenCLAllocator
    return OpenCLAllocator(spec.index)


def _runtime(spec):
    from .runtime import factory
    return factory(spec)


@hookimpl
def devicekit_device_kinds():
    return [DeviceKind(KIND, "OpenCL device: OpenCL C -> the platform's compiler -> program binary, run via pyopencl",
                       priority=2, probe=_probe, count=_count, memo=True)]


@hookimpl
def devicekit_allocator(spec):
    return AllocatorFactory(_allocator, priority=0) if spec.kind == KIND else None


@hookimpl
def devicekit_compiler_pairs(spec):
    return [CompilerPairFactory("opencl", _renderer, _compiler, priority=10)] if spec.kind == KIND else []


@hookimpl
def devicekit_runtime_factory(spec):
    return RuntimeFactoryDecl(_runtime, priority=0) if spec.kind == KIND else None
