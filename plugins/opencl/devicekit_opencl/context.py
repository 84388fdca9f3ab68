"""One OpenCL context and one in-order queue per OPENCL id, created on first use and shared by that id's compiler,
allocator and runtime (a cl_mem or cl_program belongs to one context: OPENCL:1's must never meet OPENCL:0's)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from . import platform

_lock = threading.Lock()
_contexts: dict[int, Ctx] = {}


@dataclass(eq=False)
class Ctx:
    index: int
    device: Any  # pyopencl.Device
    context: Any  # pyopencl.Context
    queue: Any  # pyopencl.CommandQueue (in order, profiling on)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def name(self) -> str:
        return "OPENCL" if self.index == 0 else f"OPENCL:{self.index}"


def get(index: int) -> Ctx:
    """The context of OPENCL:index (platform.Unavailable when it does not exist)."""
    with _lock:
        ctx = _contexts.get(index)
        if ctx is None:
            import pyopencl as cl
            dev = platform.device(index)
            context = cl.Context([dev])
            queue = cl.CommandQueue(context, dev, properties=cl.command_queue_properties.PROFILING_ENABLE)
            ctx = _contexts[index] = Ctx(index, dev, context, queue)
        return ctx
