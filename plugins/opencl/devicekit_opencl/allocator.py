"""OpenCLAllocator: cl.Buffer memory of one OPENCL id, with the core's LRU reuse. A handle is a `CLMem` (the
allocation, a byte offset into it, a size); a view is the same cl.Buffer at another offset. Copies are blocking (the
host memory may be gone right after) on the id's in-order queue, so they follow the kernels queued before them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from devicekit.memory import BufferOptions, LRUAllocator

from . import context

PAD = 64  # bytes every allocation has at least: a gated load may read element 0 of any buffer


@dataclass(frozen=True, eq=False)
class CLMem:
    mem: Any  # pyopencl.Buffer, the whole allocation
    offset: int  # bytes into it
    nbytes: int
    index: int  # the OPENCL id whose context owns it


class OpenCLAllocator(LRUAllocator):
    def __init__(self, index: int = 0, max_cached_bytes: int = 256 << 20):
        super().__init__("OPENCL" if index == 0 else f"OPENCL:{index}", max_cached_bytes)
        self.index, self.ctx = index, context.get(index)

    def _alloc(self, nbytes: int, options: BufferOptions) -> CLMem:
        import pyopencl as cl
        flags = cl.mem_flags.READ_WRITE
        if options.host or options.cpu_access:
            flags |= cl.mem_flags.ALLOC_HOST_PTR
        mem = cl.Buffer(self.ctx.context, flags, max(nbytes, PAD))
        return CLMem(mem, 0, nbytes, self.index)

    def _free(self, handle: CLMem, nbytes: int, options: BufferOptions) -> None:
        handle.mem.release()  # queued commands that use it keep it alive until they finish (OpenCL refcounts)

    def _check(self, handle: CLMem) -> None:
        if handle.index != self.index:
            raise ValueError(f"{self.device}: the buffer belongs to OPENCL:{handle.index}, not to this device")

    def copyin(self, handle: CLMem, src: memoryview) -> None:
        if src.nbytes == 0:
            return
        import pyopencl as cl
        self._check(handle)
        host = np.frombuffer(src, dtype=np.uint8)
        cl.enqueue_copy(self.ctx.queue, handle.mem, host, dst_offset=handle.offset, is_blocking=True)

    def copyout(self, dest: memoryview, handle: CLMem) -> None:
        if dest.nbytes == 0:
            return
        import pyopencl as cl
        self._check(handle)
        host = np.frombuffer(dest, dtype=np.uint8)
        cl.enqueue_copy(self.ctx.queue, host, handle.mem, src_offset=handle.offset, is_blocking=True)

    def offset(self, handle: CLMem, nbytes: int, offset: int) -> CLMem:
        return CLMem(handle.mem, handle.offset + offset, nbytes, handle.index)

    def synchronize(self) -> None:
        """Wait for everything queued so far; Ctrl-C interrupts the wait (a marker's status polled: runtime.wait_event,
        where clFinish would hold the signal until a kernel that never ends returns)."""
        import pyopencl as cl

        from .runtime import wait_event
        wait_event(cl.enqueue_marker(self.ctx.queue), self.ctx.queue)
