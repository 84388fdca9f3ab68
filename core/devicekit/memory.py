"""Device memory: the Allocator contract, an LRU cache of freed allocations, a host allocator, and Buffer."""

from __future__ import annotations

import contextlib
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from . import forksafe
from .ir.dtypes import DType, dtypes, from_numpy_values, to_numpy_values

if TYPE_CHECKING:
    from .targets import Device

__all__ = ["Allocator", "Buffer", "BufferOptions", "HostAllocator", "LRUAllocator", "from_dlpack", "from_numpy"]


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
        """Copy the bytes of `src` (a flat byte memoryview) to the start of `handle`."""

    @abstractmethod
    def copyout(self, dest: memoryview, handle: Any) -> None:
        """Copy len(dest) bytes from the start of `handle` into `dest` (a flat writable byte memoryview)."""

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


def _wrap_refusal(a: np.ndarray, dt: DType, device: Any) -> str | None:
    """Why `a` cannot become a Buffer of `dt` on `device` without a copy, or None."""
    if not device.allocator.supports("from_host"):
        return f"{device.spec}'s memory is not host memory (its allocator cannot wrap an array)"
    if a.dtype != dt.np:
        return f"the array is {a.dtype}, a {dt.name} Buffer stores {np.dtype(dt.np)}"
    if not a.flags.c_contiguous:
        return "the array is not C-contiguous"
    if not a.flags.writeable:
        return "the array is read-only (kernels may write any Buffer they are given)"
    if a.size == 0 or a.size % dt.count:
        return "the array is empty" if a.size == 0 else f"{a.size} scalars is not a whole number of {dt}"
    if a.ctypes.data % dt.itemsize:
        return f"the array's address is not aligned to {dt.itemsize} bytes"
    return None


def _not_host(buf: Buffer) -> str:
    return (f"{buf.device.spec}: only host memory is exported through DLPack (its allocator has no as_buffer): use "
            "buf.numpy() for a copy")


def from_numpy(arr: Any, device: Device | str | None = None, *, copy: bool = False, dtype: DType | Any = None
               ) -> Buffer:
    """`dk.from_numpy(arr, copy=False)`: Buffer.from_numpy."""
    return Buffer.from_numpy(arr, device, copy=copy, dtype=dtype)


def from_dlpack(obj: Any, device: Device | str | None = None, *, copy: bool = False, dtype: DType | Any = None
                ) -> Buffer:
    """`dk.from_dlpack(obj)`: Buffer.from_dlpack."""
    return Buffer.from_dlpack(obj, device, copy=copy, dtype=dtype)


def _as_dtype(dtype: Any) -> DType:
    from .ir.accept import as_dtype  # the entry points' one rule for a dtype (docs/architecture.md)
    return as_dtype(dtype, "Buffer")


class Buffer:
    """`size` elements of `dtype` on `device` (a Device or a spec string like "CPU"). Allocated on first use.

    Element counts are in elements of `dtype`; a vector dtype (float32.vec(4)) has `lanes` scalars per element.
    bfloat16 buffers store uint16 bits: `copyin` takes float32 values (rounded) or uint16 bits, `numpy()` returns
    float32 values. `view(size, dtype, offset)` shares this buffer's memory; `offset` counts elements of *this*
    buffer's dtype.
    """

    def __init__(self, device: Device | str | None, size: int, dtype: DType | Any,
                 options: BufferOptions | None = None, *, _base: Buffer | None = None, _byte_offset: int = 0):
        if isinstance(device, str) or device is None:
            from .api import resolve_device  # the one upward import of the contracts: see docs/architecture.md
            device = resolve_device(device)
        self.device = device
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise ValueError(f"Buffer size must be a non-negative int (elements), got {size!r}")
        self.size = int(size)
        self.dtype = _as_dtype(dtype)
        if self.dtype == dtypes.void:
            raise TypeError("a Buffer cannot hold dtypes.void")
        self.options = options or DEFAULT_OPTIONS
        self._base = _base
        self._byte_offset = _byte_offset
        self._handle: Any = None
        self._foreign = False  # the handle wraps memory this Buffer does not own (from_numpy/from_dlpack): never freed
        self._lock = threading.Lock()

    # ---- identity
    @property
    def allocator(self) -> Allocator:
        return self.device.allocator

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.nbytes

    @property
    def lanes(self) -> int:
        return self.dtype.count

    @property
    def base(self) -> Buffer:
        return self._base if self._base is not None else self

    @property
    def is_view(self) -> bool:
        return self._base is not None

    @property
    def offset_bytes(self) -> int:
        return self._byte_offset

    # ---- allocation
    @property
    def is_allocated(self) -> bool:
        return self._handle is not None

    def allocate(self) -> Buffer:
        with self._lock:
            if self._handle is None:
                if self._base is not None:
                    self._handle = self.allocator.offset(self._base.allocate().handle, self.nbytes, self._byte_offset)
                else:
                    self._handle = self.allocator.alloc(self.nbytes, self.options)
        return self

    @property
    def handle(self) -> Any:
        """The allocator's handle (allocating on first access)."""
        if self._handle is None:
            self.allocate()
        return self._handle

    def __del__(self):
        with contextlib.suppress(Exception):  # interpreter shutdown, half-built object
            if self._handle is not None and self._base is None and not self._foreign:
                h, self._handle = self._handle, None
                self.allocator.free(h, self.nbytes, self.options)

    # ---- data
    def _host_array(self, obj: Any) -> np.ndarray:
        """`obj` as the flat array stored in this buffer, checking dtype and size."""
        from .ir.accept import host_array  # the one rule for data (dk.run's arrays too)
        arr = host_array(obj, self.dtype)
        want = self.dtype.scalar()
        if arr.size != self.size * self.lanes:
            raise ValueError(f"size mismatch: buffer holds {self.size} x {self.dtype} "
                             f"({self.size * self.lanes} scalars), data has {arr.size}")
        return np.ascontiguousarray(from_numpy_values(arr.reshape(-1), want))

    def copyin(self, obj: Any) -> Buffer:
        """Copy host data in. Size and dtype must match exactly (no silent casts)."""
        arr = self._host_array(obj)
        if self.nbytes:
            self.allocator.copyin(self.handle, memoryview(arr).cast("B"))
        return self

    def copyout(self, dest: Any = None) -> Any:
        """Copy the contents into `dest` (a writable buffer-protocol object of exactly nbytes), or into a new
        numpy array of the storage dtype (bfloat16: uint16 bits). Returns `dest`."""
        if dest is None:
            dest = np.empty(self.size * self.lanes, dtype=self.dtype.np)
        mv = memoryview(dest)
        if mv.readonly:
            raise ValueError("copyout destination is read-only")
        if mv.nbytes != self.nbytes:
            raise ValueError(f"copyout destination has {mv.nbytes} bytes, buffer has {self.nbytes}")
        if self.nbytes:
            self.allocator.copyout(mv.cast("B") if mv.contiguous else mv, self.handle)
        return dest

    def numpy(self) -> np.ndarray:
        """A fresh numpy array of the contents (shape (size,) or (size, lanes); bfloat16 as float32 values)."""
        if self.is_allocated or self.options.zero or self.is_view:
            self.allocator.synchronize()
            stored = self.copyout()
        else:  # never written: don't allocate just to read garbage
            stored = np.zeros(self.size * self.lanes, dtype=self.dtype.np)
        out = to_numpy_values(stored, self.dtype.scalar())
        return out.reshape(self.size, self.lanes) if self.lanes > 1 else out

    # ---- zero-copy interop (host memory: DLPack and numpy)
    @classmethod
    def from_numpy(cls, arr: Any, device: Device | str | None = None, *, copy: bool = False,
                   dtype: DType | Any = None) -> Buffer:
        """A Buffer over `arr`'s memory, without a copy (`copy=True`: a new Buffer with a copy of it). The device's
        allocator must wrap host memory (CPU, PYTHON); the array must be C-contiguous, writable, aligned to its
        element size, non-empty, of the Buffer's storage dtype (`dtype=` for a vector type or bfloat16's uint16 bits);
        each refusal says why and that `copy=True` works. The Buffer keeps `arr` alive; writes on either side are
        seen by the other."""
        if isinstance(device, str) or device is None:
            from .api import resolve_device
            device = resolve_device(device)
        a = np.asarray(arr)
        dt = _as_dtype(a.dtype if dtype is None else dtype)
        if copy:
            return cls(device, a.size // dt.count if dt.count > 1 else a.size, dt).copyin(a)
        why = _wrap_refusal(a, dt, device)
        if why is not None:
            raise ValueError(f"Buffer.from_numpy: {why}; pass copy=True to copy it into a new Buffer")
        buf = cls(device, a.size // dt.count, dt, BufferOptions(nolru=True))
        buf._handle = device.allocator.from_host(memoryview(a.reshape(-1).view(np.uint8)))
        buf._foreign = True
        return buf

    @classmethod
    def from_dlpack(cls, obj: Any, device: Device | str | None = None, *, copy: bool = False,
                    dtype: DType | Any = None) -> Buffer:
        """A Buffer over the memory of any DLPack exporter on the host (a numpy array, a CPU torch/jax tensor, a
        Buffer): `from_numpy(np.from_dlpack(obj))`. Memory of another device (a CUDA tensor) is refused by name."""
        try:
            a = np.from_dlpack(obj)
        except (BufferError, RuntimeError, TypeError, ValueError) as e:
            where = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else None
            raise ValueError(f"Buffer.from_dlpack: {type(obj).__name__} cannot be read as host memory"
                             f"{f' (its DLPack device is {where})' if where else ''}: {e}") from None
        return cls.from_numpy(a, device, copy=copy, dtype=dtype)

    def _host_view(self) -> np.ndarray:
        """The Buffer's memory as a numpy array (no copy; storage dtype, shape (size,) or (size, lanes)), which keeps
        this Buffer alive: the memory is neither freed nor reused for another Buffer while the array exists."""
        import ctypes
        if not self.allocator.supports("as_buffer"):
            raise BufferError(_not_host(self))
        self.allocator.synchronize()
        try:
            mem = self.allocator.as_buffer(self.handle, self.nbytes)
        except NotImplementedError as e:  # an allocator that maps some buffers only (CUDA: host or cpu_access ones)
            raise BufferError(f"{self.device.spec}: this Buffer's memory is not mapped to the host ({e}): allocate "
                              "it with BufferOptions(cpu_access=True) to export it, or use buf.numpy() for a copy"
                              ) from None
        keep = (ctypes.c_char * self.nbytes).from_buffer(mem)
        keep.dk_buffer = self  # the exported array's base holds the Buffer
        arr = np.frombuffer(keep, dtype=self.dtype.np)
        return arr.reshape(self.size, self.lanes) if self.lanes > 1 else arr

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: bool | None = None) -> Any:
        """DLPack export of host memory: `np.from_dlpack(buf)` (and torch/jax on the CPU) read it without a copy."""
        kw = {} if max_version is None else {"max_version": max_version}
        if copy is not None:
            kw["copy"] = copy
        if dl_device is not None:
            kw["dl_device"] = dl_device
        return self._host_view().__dlpack__(**kw)

    def __dlpack_device__(self) -> tuple[int, int]:
        if not self.allocator.supports("as_buffer"):
            raise BufferError(_not_host(self))
        return (1, 0)  # kDLCPU

    def view(self, size: int, dtype: DType | Any = None, offset: int = 0) -> Buffer:
        """A Buffer of `size` x `dtype` sharing this buffer's memory, starting `offset` elements (of this buffer's
        dtype) in. Bounds-checked against the base allocation; needs an allocator that supports `offset`."""
        dt = self.dtype if dtype is None else _as_dtype(dtype)
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
            raise ValueError(f"view offset must be a non-negative int, got {offset!r}")
        byte_off = self._byte_offset + int(offset) * self.dtype.nbytes
        root = self.base
        if size < 0 or byte_off + size * dt.nbytes > root.nbytes:
            raise ValueError(f"view of {size} x {dt} at element {offset} ({byte_off} bytes into the base) does not "
                             f"fit in the base buffer of {root.nbytes} bytes")
        if byte_off % dt.itemsize:
            raise ValueError(f"view at byte {byte_off} is not aligned for {dt} ({dt.itemsize} bytes)")
        if not self.allocator.supports("offset"):
            raise NotImplementedError(f"{self.device.spec}: its allocator does not support buffer views")
        return Buffer(self.device, size, dt, root.options, _base=root, _byte_offset=byte_off)

    def __repr__(self) -> str:
        state = "allocated" if self.is_allocated else "unallocated"
        view = f" view@{self._byte_offset}B" if self.is_view else ""
        spec = getattr(self.device, "spec", self.device)
        return f"<Buffer {spec} {self.dtype}[{self.size}]{view} {state}>"
