"""devicekit entry point for OpenCL (entry-point group "devicekit", name "opencl"): one declarative record
(devicekit.backend), from which the registry generates the hooks.

Light on purpose: it imports only the core's declarations. pyopencl is imported by the probe (listing devices must
ask the ICD loader what exists) and by the pieces the record names, when an OPENCL device is built.
"""

from __future__ import annotations

from devicekit.backend import Backend, Pair

from . import settings as _settings  # noqa: F401 - declares DEVICEKIT_OPENCL_* (devicekit info shows them)

DEVICEKIT_API = (1, 0)


def _renderer(spec):
    """The renderer sized by the device's own limits (work-group size, local memory), read from its context."""
    from .context import get
    from .renderer import OpenCLRenderer
    return OpenCLRenderer.from_device(get(spec.index).device)


DEVICEKIT_BACKEND = Backend(
    "OPENCL", "OpenCL device: OpenCL C -> the platform's compiler -> program binary, run via pyopencl", priority=2,
    probe="devicekit_opencl.platform:probe",  # priority 40 with a GPU, else 2 (PoCL on the host CPU stays below CPU)
    count="devicekit_opencl.platform:count", memo=True,
    pairs=[Pair("opencl", _renderer, "devicekit_opencl.compiler:OpenCLCompiler(spec.index)", 10)],
    allocator="devicekit_opencl.allocator:OpenCLAllocator(spec.index)",
    runtime="devicekit_opencl.runtime:factory",
)
