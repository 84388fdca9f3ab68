"""Device memory's contract: BufferOptions, the Allocator every plugin implements, an LRU cache of freed allocations
and a host allocator. Buffer (devicekit.memory) is built on it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import forksafe

__all__ = ["DEFAULT_OPTIONS", "Allocator", "BufferOptions", "HostAllocator", "LRUAllocator", "Region", "RegionAllocator"]


@dataclass(frozen=True)
class BufferOptions:
    """How a buffer is allocated. Part of the LRU key: a freed buffer is only reused for the same options."""

    zero: bool = False  # contents start as zeros
    host: bool = False  # host-visible (pinned / shared) memory, where the device has such a thing
    nolru: bool = False  # never cached by an LRUAllocator: freed immediately
    cpu_access: bool = False  # the host must be able to map it (as_buffer)
    uncached: bool = False  # uncached / write-combined memory where the device offers it


DEFAULT_OPTIONS = BufferOptions()


class Allocator(ABC):
    """Allocates and moves device memory. Handles are opaque to the core.

    Required: `_alloc`, `_free`, `copyin`, `copyout`. Optional (the core checks `supports(...)`): `offset` (views),
    `as_buffer` (zero-copy host access: also what `Buffer.__dlpack__` exports), `from_host` (a handle on host memory
    someone else owns: `Buffer.from_numpy`/`from_dlpack` without a copy), `transfer` (device-to-device copy). `alloc` turns any failure of `_alloc`
    into a MemoryError naming the device and the size.
    """

    alloc_zeroes = False  # True when _alloc always returns zeroed memory (then `zero` costs nothing)

    def __init__(self, device: str = ""):
        self.device = device

    # ---- public, concrete
    def alloc(self, nbytes: int, options: BufferOptions | None = None) -> Any:
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
            raise ValueError(f"{self.device or type(self).__name__}: cannot allocate {nbytes!r} bytes")
        opts = options or DEFAULT_OPTIONS
        try:
            handle = self._alloc(int(nbytes), opts)
        except Exception as e:
            raise MemoryError(f"{self.device or type(self).__name__}: failed to allocate {nbytes} bytes "
                              f"({type(e).__name__}: {e})") from e
        if opts.zero and not self.alloc_zeroes and nbytes:
            self.copyin(handle, memoryview(bytearray(nbytes)))
        return handle

    def free(self, handle: Any, nbytes: int, options: BufferOptions | None = None) -> None:
        self._free(handle, nbytes, options or DEFAULT_OPTIONS)

    def supports(self, feature: str) -> bool:
        """Whether the optional method `feature` ("offset", "as_buffer", "transfer") is implemented."""
        return getattr(type(self), feature, None) is not getattr(Allocator, feature, None)

    # ---- backend
    @abstractmethod
    def _alloc(self, nbytes: int, options: BufferOptions) -> Any: ...

    @abstractmethod
    def _free(self, handle: Any, nbytes: int, options: BufferOptions) -> None: ...

    @abstractmethod
    def copyin(self, handle: Any, src: memoryview) -> None:
        """Copy the bytes of `src` (a flat byte memoryview) to the start of `handle`. Never called with zero bytes
        (`Buffer` and `alloc` skip empty copies), which some drivers refuse."""

    @abstractmethod
    def copyout(self, dest: memoryview, handle: Any) -> None:
        """Copy len(dest) bytes from the start of `handle` into `dest` (a flat writable byte memoryview); never zero
        bytes, as for `copyin`."""

    def offset(self, handle: Any, nbytes: int, offset: int) -> Any:
        """A handle to `nbytes` bytes of `handle` starting at byte `offset`, sharing its memory (for views)."""
        raise NotImplementedError(f"{self.device}: this allocator does not support views")

    def as_buffer(self, handle: Any, nbytes: int) -> memoryview:
        """A memoryview of the allocation itself (zero-copy host access)."""
        raise NotImplementedError(f"{self.device}: this allocator does not map memory to the host")

    def from_host(self, mem: memoryview) -> Any:
        """A handle on `mem` (flat bytes of host memory the caller owns and keeps alive), sharing it: zero-copy wrap.
        Only allocators whose handles are host memory that kernels read directly implement it."""
        raise NotImplementedError(f"{self.device}: this allocator cannot wrap host memory")

    def transfer(self, dest: Any, src: Any, nbytes: int, src_allocator: Allocator | None = None) -> None:
        """Copy `nbytes` from `src` to `dest` without going through the host."""
        raise NotImplementedError(f"{self.device}: this allocator has no device-to-device transfer")

    def synchronize(self) -> None:
        """Wait until every queued copy on this device is done. Host memory: nothing to wait for."""


class LRUAllocator(Allocator):
    """Keeps freed allocations, keyed by (nbytes, options), to hand them out again. At most `max_cached_bytes`
    are kept (least recently freed evicted first). An allocation that fails is retried once after freeing
    everything cached. Thread-safe. `stats` counts hits, misses, evictions and flushes."""

    def __init__(self, device: str = "", max_cached_bytes: int = 256 << 20):
        super().__init__(device)
        self.max_cached_bytes = max_cached_bytes
        self._cache: OrderedDict[tuple[int, BufferOptions], list[Any]] = OrderedDict()
        self.cached_bytes = 0
        self._lru_lock = forksafe.lock()
        self.stats = {"hits": 0, "misses": 0, "evicted": 0, "flushes": 0}

    def alloc(self, nbytes: int, options: BufferOptions | None = None) -> Any:
        opts = options or DEFAULT_OPTIONS
        key = (int(nbytes), opts)
        if not opts.nolru:
            with self._lru_lock:
                handles = self._cache.get(key)
                if handles:
                    handle = handles.pop()
                    if not handles:
                        del self._cache[key]
                    self.cached_bytes -= key[0]
                    self.stats["hits"] += 1
                else:
                    handle = None
            if handle is not None:
                if opts.zero and nbytes:
                    self.copyin(handle, memoryview(bytearray(nbytes)))
                return handle
        with self._lru_lock:
            self.stats["misses"] += 1
        try:
            return super().alloc(nbytes, opts)
        except MemoryError:
            if not self.cached_bytes:
                raise
            self.free_cache()
            return super().alloc(nbytes, opts)

    def free(self, handle: Any, nbytes: int, options: BufferOptions | None = None) -> None:
        opts = options or DEFAULT_OPTIONS
        if opts.nolru or nbytes > self.max_cached_bytes:
            self._free(handle, nbytes, opts)
            return
        evict: list[tuple[Any, int, BufferOptions]] = []
        with self._lru_lock:
            key = (int(nbytes), opts)
            self._cache.setdefault(key, []).append(handle)
            self._cache.move_to_end(key)
            self.cached_bytes += key[0]
            while self.cached_bytes > self.max_cached_bytes and self._cache:
                (sz, o), hs = next(iter(self._cache.items()))
                evict.append((hs.pop(0), sz, o))
                if not hs:
                    del self._cache[(sz, o)]
                self.cached_bytes -= sz
                self.stats["evicted"] += 1
        for h, sz, o in evict:
            self._free(h, sz, o)

    def free_cache(self) -> None:
        """Really free every cached allocation."""
        with self._lru_lock:
            items = [(k, h) for k, hs in self._cache.items() for h in hs]
            self._cache.clear()
            self.cached_bytes = 0
            self.stats["flushes"] += 1
        for (sz, o), h in items:
            self._free(h, sz, o)


@dataclass(frozen=True, eq=False)
class Region:
    """The handle of a device whose memory objects take a byte offset wherever they are used (OpenCL's cl_mem,
    WebGPU's GPUBuffer, Metal's MTLBuffer): the allocation, a byte offset into it, the size, and the id of the device
    whose context owns the allocation (OPENCL:1's must never meet OPENCL:0's)."""

    mem: Any
    offset: int
    nbytes: int
    index: int = 0


class RegionAllocator(LRUAllocator):
    """An LRUAllocator whose handles are `Region`s of device `index`: a view is the same allocation at another
    offset, and `_own` refuses a handle of another id before the driver sees it."""

    def __init__(self, device: str = "", index: int = 0, max_cached_bytes: int = 256 << 20):
        super().__init__(device, max_cached_bytes)
        self.index = index

    def offset(self, handle: Region, nbytes: int, offset: int) -> Region:
        return Region(handle.mem, handle.offset + offset, nbytes, handle.index)

    def _own(self, handle: Region) -> None:
        if handle.index != self.index:
            raise ValueError(f"{self.device}: the buffer belongs to device id {handle.index} of this kind, not to "
                             "this device")


class HostAllocator(LRUAllocator):
    """Host memory: each handle is a 64-byte aligned numpy uint8 array. Supports views, zero-copy and transfer.
    `capacity` (bytes, None = unbounded) makes allocations beyond it fail like a full device would."""

    alloc_zeroes = True
    ALIGN = 64

    def __init__(self, device: str = "HOST", capacity: int | None = None, max_cached_bytes: int = 64 << 20):
        super().__init__(device, max_cached_bytes)
        self.capacity = capacity
        self.live_bytes = 0  # bytes held by live or cached handles

    def _alloc(self, nbytes: int, options: BufferOptions) -> np.ndarray:
        if self.capacity is not None and self.live_bytes + nbytes > self.capacity:
            raise MemoryError(f"{self.live_bytes} of {self.capacity} bytes in use")
        raw = np.zeros(nbytes + self.ALIGN, dtype=np.uint8)
        start = (-raw.ctypes.data) % self.ALIGN
        self.live_bytes += nbytes
        return raw[start:start + nbytes]

    def _free(self, handle: np.ndarray, nbytes: int, options: BufferOptions) -> None:
        self.live_bytes -= nbytes

    def copyin(self, handle: np.ndarray, src: memoryview) -> None:
        handle[:src.nbytes] = np.frombuffer(src, dtype=np.uint8)

    def copyout(self, dest: memoryview, handle: np.ndarray) -> None:
        np.frombuffer(dest, dtype=np.uint8)[:] = handle[:dest.nbytes]

    def offset(self, handle: np.ndarray, nbytes: int, offset: int) -> np.ndarray:
        return handle[offset:offset + nbytes]

    def as_buffer(self, handle: np.ndarray, nbytes: int) -> memoryview:
        return memoryview(handle[:nbytes]).cast("B")

    def from_host(self, mem: memoryview) -> np.ndarray:
        return np.frombuffer(mem, dtype=np.uint8)

    def transfer(self, dest: np.ndarray, src: np.ndarray, nbytes: int, src_allocator: Allocator | None = None) -> None:
        dest[:nbytes] = src[:nbytes]
