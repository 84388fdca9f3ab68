"""devicekit entry point for CUDA (entry-point group "devicekit", name "cuda").

Light on purpose: it imports only the core's declarations. NVRTC and nvJitLink are loaded when a compiler is
built, pycuda when a CUDA device (allocator or runtime) is built; listing devices loads neither.
"""

from __future__ import annotations

from devicekit.backend import Backend, Pair

from . import settings as _settings  # noqa: F401 - declares DEVICEKIT_CUDA_* (devicekit info shows them)

DEVICEKIT_API = (1, 0)
RENDERER = "devicekit_cuda.renderer:CUDARenderer()"


def _nvjitlink(spec):
    from .compiler import make
    return make(spec, "nvjitlink")


def _ptxas(spec):
    from .compiler import make
    return make(spec, "ptxas")


DEVICEKIT_BACKEND = Backend(
    "CUDA", "NVIDIA GPU: CUDA C -> NVRTC -> PTX -> cubin (nvJitLink or ptxas), run via pycuda", priority=50,
    probe="devicekit_cuda.probe:runtime_status", count="devicekit_cuda.probe:count", memo=True,
    pairs=[Pair("nvrtc", RENDERER, _nvjitlink, 20), Pair("nvrtc-ptxas", RENDERER, _ptxas, 10)],
    allocator="devicekit_cuda.allocator:CUDAAllocator(spec.index)",
    runtime="devicekit_cuda.runtime:factory",
)
