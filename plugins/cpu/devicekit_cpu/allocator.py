"""CPUAllocator: 64-byte aligned host memory with LRU reuse, views, zero-copy access and wrapping of host arrays."""

from __future__ import annotations

import numpy as np
from devicekit.memory import Allocator, BufferOptions, LRUAllocator

ALIGN = 64


class CPUMem:
    """A handle: `ptr` is the address the kernel gets; `arr` (a uint8 numpy array) owns or views the memory."""

    __slots__ = ("arr", "nbytes", "ptr")

    def __init__(self, arr: np.ndarray, nbytes: int):
        self.arr = arr
        self.nbytes = nbytes
        self.ptr = arr.ctypes.data

    def __repr__(self) -> str:
        return f"<CPUMem 0x{self.ptr:x} {self.nbytes}B>"


class CPUAllocator(LRUAllocator):
    """Memory comes from numpy (calloc: zeroed, lazily paged, huge pages for big blocks), aligned to 64 bytes.
    Every allocation has at least 64 bytes, so a kernel may always read element 0 (gated loads rely on it)."""

    alloc_zeroes = True

    def __init__(self, device: str = "CPU", max_cached_bytes: int = 1 << 30):
        super().__init__(device, max_cached_bytes)

    def _alloc(self, nbytes: int, options: BufferOptions) -> CPUMem:
        raw = np.zeros(max(nbytes, ALIGN) + ALIGN, dtype=np.uint8)
        start = (-raw.ctypes.data) % ALIGN
        return CPUMem(raw[start:start + max(nbytes, ALIGN)], nbytes)

    def _free(self, handle: CPUMem, nbytes: int, options: BufferOptions) -> None:
        handle.arr = None  # numpy frees it when the last view goes

    def copyin(self, handle: CPUMem, src: memoryview) -> None:
        handle.arr[:src.nbytes] = np.frombuffer(src, dtype=np.uint8)

    def copyout(self, dest: memoryview, handle: CPUMem) -> None:
        np.frombuffer(dest, dtype=np.uint8)[:] = handle.arr[:dest.nbytes]

    def offset(self, handle: CPUMem, nbytes: int, offset: int) -> CPUMem:
        return CPUMem(handle.arr[offset:offset + nbytes], nbytes)

    def as_buffer(self, handle: CPUMem, nbytes: int) -> memoryview:
        return memoryview(handle.arr[:nbytes]).cast("B")

    def from_host(self, mem: memoryview) -> CPUMem:
        return CPUMem(np.frombuffer(mem, dtype=np.uint8), mem.nbytes)

    def transfer(self, dest: CPUMem, src: CPUMem, nbytes: int, src_allocator: Allocator | None = None) -> None:
        dest.arr[:nbytes] = src.arr[:nbytes]
