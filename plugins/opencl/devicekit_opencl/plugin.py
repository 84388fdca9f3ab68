"""devicekit entry point for OpenCL: one declarative record (devicekit.backend) the registry makes the hooks of.
It imports only the core's declarations: pyopencl is imported by the probe and by the pieces the record names."""

from __future__ import annotations

from devicekit.backend import Backend, Pair

from . import settings as _settings  # noqa: F401 - declares DEVICEKIT_OPENCL_* (devicekit info shows them)

DEVICEKIT_API = (1, 0)


DEVICEKIT_BACKEND = Backend(
    "OPENCL", "OpenCL device: OpenCL C -> the platform's compiler -> program binary, run via pyopencl", priority=2,
    probe="devicekit_opencl.platform:probe",  # priority 40 with a GPU, else 2 (PoCL on the host CPU stays below CPU)
    count="devicekit_opencl.platform:count", memo=True,
    pairs=[Pair("opencl", "devicekit_opencl.renderer:OpenCLRenderer.for_id(spec.index)",
                "devicekit_opencl.compiler:OpenCLCompiler(spec.index)", 10)],
    allocator="devicekit_opencl.allocator:OpenCLAllocator(spec.index)",
    runtime="devicekit_opencl.runtime:factory",
)
