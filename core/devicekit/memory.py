"""Buffer: device memory of one dtype and size, with its data, views, freeing and zero-copy interop. The Allocator
contract it stands on lives in devicekit.alloc (re-exported here)."""

from __future__ import annotations

import itertools
import operator
import threading
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from .alloc import DEFAULT_OPTIONS, Allocator, BufferOptions, HostAllocator, LRUAllocator
from .errors import FreedBufferError, ReadOnlyBufferError
from .ir.dtypes import DType, from_numpy_values, to_numpy_values

if TYPE_CHECKING:
    from .targets import Device

__all__ = ["Allocator", "Buffer", "BufferOptions", "HostAllocator", "LRUAllocator", "from_dlpack", "from_numpy"]


def _wrap_refusal(a: np.ndarray, dt: DType, device: Any) -> str | None:
    """Why `a` cannot become a Buffer of `dt` on `device` without a copy, or None."""
    if not device.allocator.supports("from_host"):
        return f"{device.spec}'s memory is not host memory (its allocator cannot wrap an array)"
    if a.dtype != dt.np:
        return f"the array is {a.dtype}, a {dt.name} Buffer stores {np.dtype(dt.np)}"
    if not a.flags.c_contiguous:
        return (f"the array is not C-contiguous (shape {a.shape}, strides {a.strides} bytes): a Buffer is one "
                "contiguous run of elements; np.ascontiguousarray(arr) (or copy=True) makes the copy it needs")
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
    if type(dtype) is DType:
        return dtype
    from .ir.accept import as_dtype  # the entry points' one rule for a dtype (docs/decisions.md)
    return as_dtype(dtype, "Buffer")


_STORAGE: dict[int, tuple[DType, np.dtype]] = {}  # id(DType) -> (the DType, its storage numpy dtype)
_ACCEPT: list[Any] = []  # ir.accept.host_array, imported on first use (memory sits below ir.accept's importers)


def _host_array_fn() -> Any:
    if not _ACCEPT:
        from .ir.accept import host_array  # the one rule for data (dk.run's arrays too)
        _ACCEPT.append(host_array)
    return _ACCEPT[0]


_KEYS = itertools.count(1)  # Buffer._key: a launch token per Buffer, never reused in a process
_FREES = [0]  # bumped by every Buffer.free(): launch memos and prepared plans holding handles re-check after one


def _fixed(attr: str, doc: str) -> property:
    """A read-only property whose assignment says why it is refused."""
    name = attr.lstrip("_")

    def refuse(self: Buffer, value: Any) -> None:
        raise AttributeError(f"Buffer.{name} is read-only: a Buffer's size, dtype and device are fixed when it is made "
                             "(its memory was allocated for them); make a new Buffer, or a view of part of this one "
                             "(buf.view(size, dtype, offset))")
    return property(operator.attrgetter(attr), refuse, doc=doc)


class Buffer:
    """`size` elements of `dtype` on `device` (a Device or a spec string like "CPU"). Allocated on first use.

    Element counts are in elements of `dtype`; a vector dtype (float32.vec(4)) has `lanes` scalars per element.
    bfloat16 buffers store uint16 bits: `copyin` takes float32 values (rounded) or uint16 bits, `numpy()` returns
    float32 values. `view(size, dtype, offset)` shares this buffer's memory; `offset` counts elements of *this*
    buffer's dtype. `size`, `dtype` and `device` are fixed for the Buffer's life (read-only: every launch is checked
    against the allocation's own byte count). `free()` (or a `with` block) gives the memory back at once; any later
    use raises FreedBufferError naming the Buffer. A read-only Buffer (over a read-only array or DLPack export) is
    accepted for the params a kernel only reads and refused, by name, for the ones it writes.
    """

    def __init__(self, device: Device | str | None, size: int, dtype: DType | Any,
                 options: BufferOptions | None = None, *, _base: Buffer | None = None, _byte_offset: int = 0):
        if isinstance(device, str) or device is None:
            from .api import resolve_device  # the one upward import of the contracts: see docs/architecture.md
            device = resolve_device(device)
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise ValueError(f"Buffer size must be a non-negative int (elements), got {size!r}")
        dt = _as_dtype(dtype)
        if dt.name == "void":
            raise TypeError("a Buffer cannot hold dtypes.void")
        self._device, self._size, self._dtype, self._nbytes = device, int(size), dt, int(size) * dt.nbytes
        self.options = options or DEFAULT_OPTIONS
        self._base = _base
        self._byte_offset = _byte_offset
        self._handle: Any = None
        self._foreign = False  # the handle wraps memory this Buffer does not own (from_numpy/from_dlpack): never freed
        self._freed = False
        # this Buffer's launch token (never reused, 0 once freed): a Program's launch cache keys on it, so a changed
        # Buffer costs one attribute read and a freed one can never match an entry made for it (devicekit.signature)
        self._key = next(_KEYS)
        self._readonly = _base is not None and _base._readonly
        self._views: weakref.WeakSet | None = None  # a base's live views: freeing the base makes them unusable
        self._lock = threading.Lock()

    # ---- identity (read-only: the memory was allocated for them)
    device = _fixed("_device", "the Device the memory is on")
    size = _fixed("_size", "elements of `dtype`")
    dtype = _fixed("_dtype", "the element type")

    @property
    def nbytes(self) -> int:
        """The allocation's byte count: what every launch checks a param's needs against."""
        return self._nbytes

    @property
    def allocator(self) -> Allocator:
        return self._device.allocator

    @property
    def lanes(self) -> int:
        return self._dtype.count

    @property
    def base(self) -> Buffer:
        return self._base if self._base is not None else self

    @property
    def is_view(self) -> bool:
        return self._base is not None

    @property
    def offset_bytes(self) -> int:
        return self._byte_offset

    @property
    def readonly(self) -> bool:
        """True for a Buffer over read-only memory: kernels may read it, nothing may write it."""
        return self._readonly

    @property
    def freed(self) -> bool:
        """True once `free()` ran on this Buffer or on the Buffer it is a view of."""
        return self._freed

    # ---- allocation
    @property
    def is_allocated(self) -> bool:
        return self._handle is not None

    def _refuse_freed(self) -> None:
        if self._freed:
            what = "its base Buffer was freed" if self._base is not None and self._base._freed else "it was freed"
            raise FreedBufferError(f"{self!r} cannot be used: {what} (Buffer.free() or the end of its `with` "
                                   "block), and its memory may belong to another Buffer now; make a new Buffer")

    def allocate(self) -> Buffer:
        with self._lock:
            self._refuse_freed()
            if self._handle is None:
                if self._base is not None:
                    self._handle = self.allocator.offset(self._base.allocate().handle, self._nbytes, self._byte_offset)
                else:
                    self._handle = self.allocator.alloc(self._nbytes, self.options)
        return self

    @property
    def handle(self) -> Any:
        """The allocator's handle (allocating on first access). FreedBufferError after `free()`."""
        h = self._handle
        if h is None:
            self.allocate()
            h = self._handle
        return h

    def free(self) -> None:
        """Give the memory back now (to the allocator's cache, or to the array a zero-copy Buffer wraps). Any later
        use of this Buffer, or of a view of it, raises FreedBufferError naming it. Freeing a view makes only the view
        unusable. Freeing twice is a no-op."""
        with self._lock:
            if self._freed:
                return
            self._freed, self._key = True, 0
            h, self._handle = self._handle, None
            views, self._views = self._views, None
        _FREES[0] += 1
        for v in list(views or ()):
            v._freed, v._handle, v._key = True, None, 0
        if h is not None and self._base is None and not self._foreign:
            self.allocator.free(h, self._nbytes, self.options)

    def __enter__(self) -> Buffer:  # noqa: PYI034 - Buffer subclasses are not a use case
        self._refuse_freed()
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    def __del__(self):
        try:
            if self._handle is not None and self._base is None and not self._foreign:
                h, self._handle = self._handle, None
                self.allocator.free(h, self._nbytes, self.options)
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown, a half-built object: nothing to give back
            pass

    # ---- data
    def _host_array(self, obj: Any) -> np.ndarray:
        """`obj` as the flat array stored in this buffer, checking dtype and size."""
        arr = _host_array_fn()(obj, self._dtype)
        want = self._dtype.scalar()
        if arr.size != self._size * self.lanes:
            raise ValueError(f"size mismatch: buffer holds {self._size} x {self._dtype} "
                             f"({self._size * self.lanes} scalars), data has {arr.size}")
        return np.ascontiguousarray(from_numpy_values(arr.reshape(-1), want))

    def copyin(self, obj: Any) -> Buffer:
        """Copy host data in. Size and dtype must match exactly (no silent casts)."""
        self._refuse_freed()
        if self._readonly:
            raise ReadOnlyBufferError(f"{self!r} is read-only (it wraps read-only memory): copy the data into a new "
                                      "Buffer instead")
        st = _STORAGE.get(id(self._dtype))
        if st is None or st[0] is not self._dtype:
            st = _STORAGE[id(self._dtype)] = (self._dtype, np.dtype(self._dtype.np))
        if (type(obj) is np.ndarray and obj.dtype == st[1] and obj.size == self._size * self._dtype.count
                and obj.flags.c_contiguous):  # already the stored representation: host_array would keep it as is
            arr = obj
        else:
            arr = self._host_array(obj)
        if self._nbytes:
            self.allocator.copyin(self.handle, memoryview(arr).cast("B"))
        return self

    def copyout(self, dest: Any = None) -> Any:
        """Copy the contents into `dest` (a writable buffer-protocol object of exactly nbytes), or into a new
        numpy array of the storage dtype (bfloat16: uint16 bits). Returns `dest`."""
        self._refuse_freed()
        if dest is None:
            dest = np.empty(self._size * self.lanes, dtype=self._dtype.np)
        mv = memoryview(dest)
        if mv.readonly:
            raise ValueError("copyout destination is read-only")
        if mv.nbytes != self._nbytes:
            raise ValueError(f"copyout destination has {mv.nbytes} bytes, buffer has {self._nbytes}")
        if self._nbytes:
            self.allocator.copyout(mv.cast("B") if mv.contiguous else mv, self.handle)
        return dest

    def numpy(self) -> np.ndarray:
        """A fresh numpy array of the contents (shape (size,) or (size, lanes); bfloat16 as float32 values)."""
        self._refuse_freed()
        if self.is_allocated or self.options.zero or self.is_view:
            self.allocator.synchronize()
            stored = self.copyout()
        else:  # never written: don't allocate just to read garbage
            stored = np.zeros(self._size * self.lanes, dtype=self._dtype.np)
        out = to_numpy_values(stored, self._dtype.scalar())
        return out.reshape(self._size, self.lanes) if self.lanes > 1 else out

    # ---- zero-copy interop (host memory: DLPack and numpy)
    @classmethod
    def from_numpy(cls, arr: Any, device: Device | str | None = None, *, copy: bool = False,
                   dtype: DType | Any = None, _who: str = "Buffer.from_numpy") -> Buffer:
        """A Buffer over `arr`'s memory, without a copy (`copy=True`: a new Buffer with a copy of it). The device's
        allocator must wrap host memory (CPU, PYTHON); the array must be C-contiguous, aligned to its element size,
        non-empty, of the Buffer's storage dtype (`dtype=` for a vector type or bfloat16's uint16 bits); each refusal
        says why and that `copy=True` works. A read-only array gives a read-only Buffer (kernels may read it, a
        writable param refuses it by name). The Buffer keeps `arr` alive; writes on either side are seen by the
        other."""
        if isinstance(device, str) or device is None:
            from .api import resolve_device
            device = resolve_device(device)
        a = np.asarray(arr)
        dt = _as_dtype(a.dtype if dtype is None else dtype)
        if copy:
            return cls(device, a.size // dt.count if dt.count > 1 else a.size, dt).copyin(a)
        why = _wrap_refusal(a, dt, device)
        if why is not None:
            raise ValueError(f"{_who}: {why}; pass copy=True to copy it into a new Buffer")
        buf = cls(device, a.size // dt.count, dt, BufferOptions(nolru=True))
        buf._handle = device.allocator.from_host(memoryview(a.reshape(-1).view(np.uint8)))
        buf._foreign = True
        buf._readonly = not a.flags.writeable
        buf._keep = a  # the array (and whatever exported it) outlives the Buffer
        return buf

    @classmethod
    def from_dlpack(cls, obj: Any, device: Device | str | None = None, *, copy: bool = False,
                    dtype: DType | Any = None) -> Buffer:
        """A Buffer over the memory of any DLPack exporter on the host (a numpy array, a CPU torch/jax tensor, a
        Buffer): `from_numpy(np.from_dlpack(obj))`. A read-only export (jax's) gives a read-only Buffer. Memory of
        another device (a CUDA tensor) is refused by name."""
        try:
            a = np.from_dlpack(obj)
        except (BufferError, RuntimeError, TypeError, ValueError) as e:
            where = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else None
            raise ValueError(f"Buffer.from_dlpack: {type(obj).__name__} cannot be read as host memory"
                             f"{f' (its DLPack device is {where})' if where else ''}: {e}") from None
        return cls.from_numpy(a, device, copy=copy, dtype=dtype, _who="Buffer.from_dlpack")

    def _host_view(self) -> np.ndarray:
        """The Buffer's memory as a numpy array (no copy; storage dtype, shape (size,) or (size, lanes)), which keeps
        this Buffer alive: the memory is neither freed nor reused for another Buffer while the array exists."""
        import ctypes
        self._refuse_freed()
        if not self.allocator.supports("as_buffer"):
            raise BufferError(_not_host(self))
        self.allocator.synchronize()
        try:
            mem = self.allocator.as_buffer(self.handle, self._nbytes)
        except NotImplementedError as e:  # an allocator that maps some buffers only (CUDA: host or cpu_access ones)
            raise BufferError(f"{self._device.spec}: this Buffer's memory is not mapped to the host ({e}): allocate "
                              "it with BufferOptions(cpu_access=True) to export it, or use buf.numpy() for a copy"
                              ) from None
        if self._readonly:  # wrapped read-only memory: the array it came from owns it, and the export stays read-only
            arr = np.frombuffer(mem, dtype=self._dtype.np)
        else:
            keep = (ctypes.c_char * self._nbytes).from_buffer(mem)
            keep.dk_buffer = self  # the exported array's base holds the Buffer
            arr = np.frombuffer(keep, dtype=self._dtype.np)
        return arr.reshape(self._size, self.lanes) if self.lanes > 1 else arr

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
        dtype) in: a batch of a dataset, one layer's slice of a parameter block, the same bytes as another dtype.
        Bounds-checked against the base allocation; needs an allocator that supports `offset`. A view is read-only
        when its base is, and unusable once its base is freed."""
        self._refuse_freed()
        dt = self._dtype if dtype is None else _as_dtype(dtype)
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
            raise ValueError(f"view offset must be a non-negative int, got {offset!r}")
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
            raise TypeError(f"view size must be a non-negative int (elements), got {size!r}")
        byte_off = self._byte_offset + int(offset) * self._dtype.nbytes
        root = self.base
        if size < 0 or byte_off + size * dt.nbytes > root._nbytes:
            raise ValueError(f"view of {size} x {dt} at element {offset} ({byte_off} bytes into the base) does not "
                             f"fit in the base buffer of {root._nbytes} bytes")
        if byte_off % dt.itemsize:
            raise ValueError(f"view at byte {byte_off} is not aligned for {dt} ({dt.itemsize} bytes)")
        if not self.allocator.supports("offset"):
            raise NotImplementedError(f"{self._device.spec}: its allocator does not support buffer views")
        v = Buffer(self._device, size, dt, root.options, _base=root, _byte_offset=byte_off)
        with root._lock:
            if root._views is None:
                root._views = weakref.WeakSet()
            root._views.add(v)
        return v

    def __repr__(self) -> str:
        state = "freed" if self._freed else "allocated" if self.is_allocated else "unallocated"
        view = f" view@{self._byte_offset}B" if self.is_view else ""
        ro = " read-only" if self._readonly else ""
        spec = getattr(self._device, "spec", self._device)
        return f"<Buffer {spec} {self._dtype}[{self._size}]{view}{ro} {state}>"
