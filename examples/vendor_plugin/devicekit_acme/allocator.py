"""AcmeAllocator: ACME memory, here host memory from the core's LRU host allocator (freed blocks are reused)."""

from __future__ import annotations

import numpy as np
from devicekit.memory import BufferOptions, HostAllocator

PAD = 64  # every allocation can be read 64 bytes past its start: a gated load may read element 0 of any buffer


class AcmeAllocator(HostAllocator):
    """Handles are 64-byte aligned numpy uint8 arrays (views, zero-copy and transfer come from HostAllocator); the
    runtime passes `handle.ctypes.data` to the kernel."""

    def __init__(self, device: str = "ACME", capacity: int | None = None, max_cached_bytes: int = 64 << 20):
        super().__init__(device, capacity, max_cached_bytes)

    def _alloc(self, nbytes: int, options: BufferOptions) -> np.ndarray:
        padded = super()._alloc(max(nbytes, PAD), options)
        self.live_bytes -= max(nbytes, PAD) - nbytes  # account what the caller asked for
        return padded[:nbytes]
