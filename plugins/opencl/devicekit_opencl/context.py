"""One OpenCL context and one in-order queue per OPENCL id, created on first use and shared by that id's compiler,
allocator and runtime (a cl_mem or cl_program belongs to one context: OPENCL:1's must never meet OPENCL:0's)."""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any

from devicekit.launch_sizes import Limits

from . import platform

_lock = threading.Lock()
_contexts: dict[int, Ctx] = {}


@dataclass(eq=False)
class Ctx:
    index: int
    device: Any  # pyopencl.Device
    context: Any  # pyopencl.Context
    queue: Any  # pyopencl.CommandQueue (in order, profiling on)

    @property
    def name(self) -> str:
        return "OPENCL" if self.index == 0 else f"OPENCL:{self.index}"

    @functools.cached_property
    def binary_key(self) -> str:
        """What a program binary is specific to (the compiler writes it into each record, the runtime refuses
        another): the platform and its version, the device, its OpenCL version and the driver version."""
        d = self.device
        return (f"{d.platform.name.strip()}|{d.platform.version.strip()}|{d.name.strip()}|{d.version.strip()}|"
                f"driver {d.driver_version.strip()}")

    @functools.cached_property
    def limits(self) -> Limits:
        """The device's launch limits (devicekit.launch_sizes); on PoCL fewer than 2^32 work-groups in all (2^32 kill
        the process with SIGILL)."""
        d = self.device
        pocl = "portable computing language" in d.platform.name.lower()
        return Limits(device=f"{self.name} ({d.name.strip()})", max_axes=int(d.max_work_item_dimensions),
                      max_local=tuple(int(x) for x in d.max_work_item_sizes),
                      max_group_items=int(d.max_work_group_size),
                      max_global=(2 ** int(d.address_bits) - 1,) * 3, max_total_groups=2 ** 32 - 1 if pocl else None,
                      why_total_groups=" (PoCL's limit: 2^32 work-groups or more crash it)" if pocl else "")


def get(index: int) -> Ctx:
    """The context of OPENCL:index (platform.Unavailable when it does not exist)."""
    with _lock:
        if index not in _contexts:
            import pyopencl as cl
            dev = platform.device(index)
            context = cl.Context([dev])
            queue = cl.CommandQueue(context, dev, properties=cl.command_queue_properties.PROFILING_ENABLE)
            _contexts[index] = Ctx(index, dev, context, queue)
        return _contexts[index]
