"""MetalAllocator: shared-storage MTLBuffers (unified memory: the CPU reads and writes them directly).

A handle is a `MetalHandle(buf, offset, nbytes)`; views share the MTLBuffer and add an offset, which the runtime
passes to setBuffer:offset:atIndex:. Copies wait for the command buffers in flight first (a kernel may still be
writing). macOS only: built by the plugin's allocator factory when a METAL device is created.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devicekit.memory import BufferOptions, LRUAllocator


@dataclass(frozen=True)
class MetalHandle:
    buf: Any  # id<MTLBuffer>
    offset: int
    nbytes: int


class MetalAllocator(LRUAllocator):
    def __init__(self, ctx, device: str = "METAL", max_cached_bytes: int = 256 << 20):
        super().__init__(device, max_cached_bytes)
        self.ctx = ctx

    def _alloc(self, nbytes: int, options: BufferOptions) -> MetalHandle:
        Metal = self.ctx.Metal
        buf = self.ctx.device.newBufferWithLength_options_(max(nbytes, 1), Metal.MTLResourceStorageModeShared)
        if buf is None:
            raise MemoryError(f"newBufferWithLength({nbytes}) returned nil on {self.ctx.name}")
        return MetalHandle(buf, 0, nbytes)

    def _free(self, handle: MetalHandle, nbytes: int, options: BufferOptions) -> None:
        # pyobjc owns the +1 reference from newBuffer...; command buffers in flight retain what they use
        del handle

    def _view(self, handle: MetalHandle) -> memoryview:
        mv = handle.buf.contents().as_buffer(handle.buf.length())
        mv = mv.cast("B") if mv.format != "B" else mv
        return mv[handle.offset:handle.offset + handle.nbytes]

    def copyin(self, handle: MetalHandle, src: memoryview) -> None:
        self.ctx.synchronize()
        self._view(handle)[:src.nbytes] = src.cast("B") if src.format != "B" else src

    def copyout(self, dest: memoryview, handle: MetalHandle) -> None:
        self.ctx.synchronize()
        dest[:] = self._view(handle)[:dest.nbytes]

    def offset(self, handle: MetalHandle, nbytes: int, offset: int) -> MetalHandle:
        return MetalHandle(handle.buf, handle.offset + offset, nbytes)

    def as_buffer(self, handle: MetalHandle, nbytes: int) -> memoryview:
        self.ctx.synchronize()
        return self._view(handle)[:nbytes]

    def synchronize(self) -> None:
        self.ctx.synchronize()
