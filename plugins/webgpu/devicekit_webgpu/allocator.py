"""WebGPUAllocator: storage buffers of one WEBGPU id, with the core's LRU reuse; copies through mapped staging buffers.

A handle is a core `Region` (devicekit.alloc): the allocation's GPUBuffer (usage STORAGE | COPY_SRC | COPY_DST, its size rounded up to 4
bytes as WebGPU's copies and bindings need), a byte offset into it (views, at any byte: generated kernels take the
offset in elements through their uniform args), a size and the id. copyin fills a staging buffer mapped at creation
(MAP_WRITE) and copies it over; copyout copies into a MAP_READ staging buffer and maps it. Both are on the device's
queue, so they are ordered after the dispatches submitted before them, and both block. WebGPU copies move whole
4-byte words: an unaligned copyin reads the words it touches first.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from devicekit.alloc import BufferOptions, Region, RegionAllocator

from . import adapters

PAD = 16  # bytes every allocation has at least


def _words(offset: int, nbytes: int) -> tuple[int, int]:
    """The 4-byte-aligned byte range [lo, hi) that covers [offset, offset + nbytes)."""
    return offset & ~3, (offset + nbytes + 3) & ~3


class WebGPUAllocator(RegionAllocator):
    def __init__(self, index: int = 0, max_cached_bytes: int = 256 << 20):
        super().__init__("WEBGPU" if index == 0 else f"WEBGPU:{index}", index, max_cached_bytes)
        self.ctx = adapters.get(index)
        # every GPUBuffer until _free: a Buffer collected in a reference cycle hands its handle back to the LRU from
        # its finalizer, and the GPUBuffer's own finalizer (which releases the native buffer) must not run with it
        self._live: dict[int, Any] = {}

    def _alloc(self, nbytes: int, options: BufferOptions) -> Region:
        import wgpu
        size = max(PAD, (nbytes + 3) & ~3)
        limit = int(self.ctx.limits["max-buffer-size"])
        if size > limit:
            raise MemoryError(f"{self.device}: {nbytes} bytes is more than this adapter's max-buffer-size ({limit})")
        u = wgpu.BufferUsage
        buf = self.ctx.device.create_buffer(size=size, usage=u.STORAGE | u.COPY_SRC | u.COPY_DST)  # zeroed by WebGPU
        self._live[id(buf)] = buf
        return Region(buf, 0, nbytes, self.index)

    def _free(self, handle: Region, nbytes: int, options: BufferOptions) -> None:
        self._live.pop(id(handle.mem), None)
        handle.mem.destroy()  # work already submitted that uses it still completes (WebGPU defers the release)

    def _read(self, buf: Any, lo: int, hi: int) -> np.ndarray:
        import wgpu
        dev = self.ctx.device
        staging = dev.create_buffer(size=hi - lo, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
        enc = dev.create_command_encoder()
        enc.copy_buffer_to_buffer(buf, lo, staging, 0, hi - lo)
        dev.queue.submit([enc.finish()])
        staging.map_sync(wgpu.MapMode.READ)
        try:
            return np.frombuffer(staging.read_mapped(), dtype=np.uint8).copy()
        finally:
            staging.unmap()
            staging.destroy()

    def copyin(self, handle: Region, src: memoryview) -> None:
        if src.nbytes == 0:
            return
        import wgpu
        self._own(handle)
        host = np.frombuffer(src, dtype=np.uint8)
        lo, hi = _words(handle.offset, host.nbytes)
        if (lo, hi) != (handle.offset, handle.offset + host.nbytes):  # keep the neighbouring bytes of the words
            words = self._read(handle.mem, lo, hi)
            words[handle.offset - lo:handle.offset - lo + host.nbytes] = host
            host = words
        dev = self.ctx.device
        staging = dev.create_buffer(size=hi - lo, usage=wgpu.BufferUsage.MAP_WRITE | wgpu.BufferUsage.COPY_SRC,
                                    mapped_at_creation=True)
        staging.write_mapped(host)
        staging.unmap()
        enc = dev.create_command_encoder()
        enc.copy_buffer_to_buffer(staging, 0, handle.mem, lo, hi - lo)
        dev.queue.submit([enc.finish()])  # the staging buffer is released when the copy no longer needs it

    def copyout(self, dest: memoryview, handle: Region) -> None:
        if dest.nbytes == 0:
            return
        self._own(handle)
        lo, hi = _words(handle.offset, dest.nbytes)
        words = self._read(handle.mem, lo, hi)
        np.frombuffer(dest, dtype=np.uint8)[:] = words[handle.offset - lo:handle.offset - lo + dest.nbytes]

    def synchronize(self) -> None:
        self.ctx.wait()
