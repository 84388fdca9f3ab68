"""OpenCLAllocator: cl.Buffer memory of one OPENCL id, with the core's LRU reuse. A handle is a core `Region` (the
cl.Buffer, a byte offset into it, a size, the id); a view is the same cl.Buffer at another offset. Copies are blocking
(the host memory may be gone right after) on the id's in-order queue, so they follow the kernels queued before them."""

from __future__ import annotations

import numpy as np
import pyopencl as cl
from devicekit.alloc import BufferOptions, Region, RegionAllocator

from . import context

PAD = 64  # bytes every allocation has at least: a gated load may read element 0 of any buffer


class OpenCLAllocator(RegionAllocator):
    def __init__(self, index: int = 0, max_cached_bytes: int = 256 << 20):
        self.ctx = context.get(index)
        super().__init__(self.ctx.name, index, max_cached_bytes)

    def _alloc(self, nbytes: int, options: BufferOptions) -> Region:
        flags = cl.mem_flags.READ_WRITE
        if options.host or options.cpu_access:
            flags |= cl.mem_flags.ALLOC_HOST_PTR
        return Region(cl.Buffer(self.ctx.context, flags, max(nbytes, PAD)), 0, nbytes, self.index)

    def _free(self, handle: Region, nbytes: int, options: BufferOptions) -> None:
        handle.mem.release()  # queued commands that use it keep it alive until they finish (OpenCL refcounts)

    def copyin(self, handle: Region, src: memoryview) -> None:
        self._own(handle)
        host = np.frombuffer(src, dtype=np.uint8)
        cl.enqueue_copy(self.ctx.queue, handle.mem, host, dst_offset=handle.offset, is_blocking=True)

    def copyout(self, dest: memoryview, handle: Region) -> None:
        self._own(handle)
        host = np.frombuffer(dest, dtype=np.uint8)
        cl.enqueue_copy(self.ctx.queue, host, handle.mem, src_offset=handle.offset, is_blocking=True)

    def synchronize(self) -> None:
        self.ctx.synchronize()
