"""devicekit entry point for CUDA (entry-point group "devicekit", name "cuda").

Light on purpose: it imports only the core's declarations. NVRTC and nvJitLink are loaded when a compiler is
built, pycuda when a CUDA device (allocator or runtime) is built; listing devices loads neither.
"""

from __future__ import annotations

from devicekit.hookspecs import hookimpl
from devicekit.plugin import AllocatorFactory, CompilerPairFactory, DeviceKind, RuntimeFactoryDecl

from . import settings as _settings  # noqa: F401 - declares DEVICEKIT_CUDA_* (devicekit info shows them)

DEVICEKIT_API = (1, 0)
KIND = "CUDA"


def _probe():
    from .probe import runtime_status
    return runtime_status()


def _count() -> int:
    from .probe import count
    return count()


def _renderer(spec):
    from .renderer import CUDARenderer
    return CUDARenderer()


def _compiler_nvjitlink(spec):
    from .compiler import make
    return make(spec, "nvjitlink")


def _compiler_ptxas(spec):
    from .compiler import make
    return make(spec, "ptxas")


def _allocator(spec):
    from .allocator import CUDAAllocator
    return CUDAAllocator(spec.index)


def _runtime(spec):
    from .runtime import factory
    return factory(spec)


@hookimpl
def devicekit_device_kinds():
    return [DeviceKind(KIND, "NVIDIA GPU: CUDA C -> NVRTC -> PTX -> cubin (nvJitLink or ptxas), run via pycuda",
                       priority=50, probe=_probe, count=_count, memo=True)]


@hookimpl
def devicekit_allocator(spec):
    return AllocatorFactory(_allocator, priority=0) if spec.kind == KIND else None


@hookimpl
def devicekit_compiler_pairs(spec):
    if spec.kind != KIND:
        return []
    return [CompilerPairFactory("nvrtc", _renderer, _compiler_nvjitlink, priority=20),
            CompilerPairFactory("nvrtc-ptxas", _renderer, _compiler_ptxas, priority=10)]


@hookimpl
def devicekit_runtime_factory(spec):
    return RuntimeFactoryDecl(_runtime, priority=0) if spec.kind == KIND else None
