"""One OpenCL context and one in-order queue per OPENCL id, created on first use (devicekit.per_index) and shared by
that id's compiler, allocator and runtime (a cl_mem or cl_program belongs to one context: OPENCL:1's must never meet
OPENCL:0's), and the one way to wait on that queue: polling an event, so Ctrl-C interrupts a kernel that never ends."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import pyopencl as cl
from devicekit import interrupt
from devicekit.launch_sizes import Limits
from devicekit.per_index import per_index

from . import platform


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

    def wait(self, ev: Any, keep: Any = None) -> None:
        """Wait for `ev`, a command of this queue, so that Ctrl-C interrupts the wait (devicekit.interrupt.wait_event
        polls its status on the main thread, where clFinish would hold the signal until a kernel that never ends
        returns); a failed command raises here. `keep` stays referenced until it ends when the wait is interrupted."""
        self.queue.flush()  # polled status moves only for commands the driver was handed
        interrupt.wait_event(lambda: ev.command_execution_status <= cl.command_execution_status.COMPLETE, ev.wait,
                             keep)

    def synchronize(self) -> None:
        """Wait for everything queued so far: a marker behind it, waited for as above."""
        self.wait(cl.enqueue_marker(self.queue))


@per_index
def get(index: int) -> Ctx:
    """The context of OPENCL:index (platform.Unavailable when it does not exist)."""
    dev = platform.device(index)
    context = cl.Context([dev])
    queue = cl.CommandQueue(context, dev, properties=cl.command_queue_properties.PROFILING_ENABLE)
    return Ctx(index, dev, context, queue)
