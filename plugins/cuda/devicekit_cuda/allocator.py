"""CUDAAllocator: device memory through pycuda, with the core's LRU reuse.

Handles are `DevicePtr`s: an int device address plus the allocation that owns it (views share the owner).
copyin stages through pinned host memory and is asynchronous on the device's stream (staging buffers are
released at `synchronize`); copyout waits for the stream, then copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from devicekit.memory import BufferOptions, LRUAllocator

from . import context

_STAGING_LIMIT = 256 << 20  # pinned staging bytes held before copyin synchronizes on its own


@dataclass(frozen=True, eq=False)
class DevicePtr:
    ptr: int
    nbytes: int
    owner: Any  # pycuda DeviceAllocation or a pinned array (host=True); kept alive by views

    def __int__(self) -> int:
        return self.ptr


class CUDAAllocator(LRUAllocator):
    def __init__(self, index: int = 0, max_cached_bytes: int = 1 << 30):
        super().__init__("CUDA" if index == 0 else f"CUDA:{index}", max_cached_bytes)
        self.index = index
        self.ctx = context.get(index)
        self._staging: list[Any] = []
        self._staging_bytes = 0

    def _alloc(self, nbytes: int, options: BufferOptions) -> DevicePtr:
        cuda = self.ctx.cuda
        with self.ctx:
            if options.host or options.cpu_access:
                arr = cuda.pagelocked_empty(max(nbytes, 1), np.uint8, mem_flags=cuda.host_alloc_flags.DEVICEMAP)
                return DevicePtr(int(arr.base.get_device_pointer()), nbytes, arr)
            mem = cuda.mem_alloc(max(nbytes, 1))
            return DevicePtr(int(mem), nbytes, mem)

    def _free(self, handle: DevicePtr, nbytes: int, options: BufferOptions) -> None:
        owner = handle.owner
        with self.ctx:
            self.ctx.stream.synchronize()  # a kernel may still use it
            if hasattr(owner, "free"):
                owner.free()

    def copyin(self, handle: DevicePtr, src: memoryview) -> None:
        cuda = self.ctx.cuda
        n = src.nbytes
        if n == 0:
            return
        with self.ctx:
            stage = cuda.pagelocked_empty(n, np.uint8)
            stage[:] = np.frombuffer(src, dtype=np.uint8)
            cuda.memcpy_htod_async(handle.ptr, stage, self.ctx.stream)
            self._staging.append(stage)
            self._staging_bytes += n
            if self._staging_bytes > _STAGING_LIMIT:
                self._sync_locked()

    def copyout(self, dest: memoryview, handle: DevicePtr) -> None:
        if dest.nbytes == 0:
            return
        with self.ctx:
            self._sync_locked()
            self.ctx.cuda.memcpy_dtoh(np.frombuffer(dest, dtype=np.uint8), handle.ptr)

    def offset(self, handle: DevicePtr, nbytes: int, offset: int) -> DevicePtr:
        return DevicePtr(handle.ptr + offset, nbytes, handle.owner)

    def as_buffer(self, handle: DevicePtr, nbytes: int) -> memoryview:
        if isinstance(handle.owner, np.ndarray):  # mapped pinned host memory
            self.synchronize()
            base = handle.owner.base.get_device_pointer()
            off = handle.ptr - int(base)
            return memoryview(handle.owner[off:off + nbytes]).cast("B")
        raise NotImplementedError(f"{self.device}: only buffers allocated with host=True map to the host")

    def transfer(self, dest: DevicePtr, src: DevicePtr, nbytes: int, src_allocator=None) -> None:
        cuda = self.ctx.cuda
        if isinstance(src_allocator, CUDAAllocator) and src_allocator.index != self.index:
            src_allocator.synchronize()
            with self.ctx:
                cuda.memcpy_peer(dest.ptr, src.ptr, nbytes, self.ctx.ctx, src_allocator.ctx.ctx)
            return
        with self.ctx:
            cuda.memcpy_dtod_async(dest.ptr, src.ptr, nbytes, self.ctx.stream)

    def _sync_locked(self) -> None:
        self.ctx.stream.synchronize()
        self._staging.clear()
        self._staging_bytes = 0

    def synchronize(self) -> None:
        self.ctx.synchronize()  # Ctrl-C interrupts the wait for a kernel that never ends
        with self.ctx:
            self._sync_locked()
