"""A stand-in for `pycuda.driver`, enough for devicekit_cuda's context, allocator and runtime to run on the host.

Device memory is host memory (numpy arrays; a "device pointer" is the array's address), copies are memmoves, and a
loaded module runs its kernel through the host emulation (cuda_host_emu): `module_from_buffer` reads the kernel
names from the real cubin and finds the emulated kernel registered under that name. Launch arguments arrive exactly
as the runtime packs them (pointers and int64 vars in `prepare` order, grid and block dims), so argument order,
views (pointer offsets), the var ABI and launch geometry are all checked. Every call is recorded in `calls`.
"""

from __future__ import annotations

import ctypes
import sys
import time
import types

import numpy as np
from devicekit.testing.native_gate import NativeGate

KERNELS: dict = {}  # kernel name -> cuda_host_emu.HostKernel (found by name or by entry symbol)
calls: list[tuple] = []
_live: dict[int, np.ndarray] = {}


class Error(Exception):
    pass


class LogicError(Error):
    pass


class _Attr:
    def __getattr__(self, name):
        return name


device_attribute = _Attr()
function_attribute = _Attr()


class host_alloc_flags:
    DEVICEMAP = 2


_ATTRS = {"MAX_GRID_DIM_X": 2**31 - 1, "MAX_GRID_DIM_Y": 65535, "MAX_GRID_DIM_Z": 65535,
          "MAX_BLOCK_DIM_X": 1024, "MAX_BLOCK_DIM_Y": 1024, "MAX_BLOCK_DIM_Z": 64}
_stack: list = []
N_DEVICES = 2


def init(flags=0):
    calls.append(("init",))


class Context:
    def __init__(self, index):
        self.index = index

    def push(self):
        _stack.append(self)

    @staticmethod
    def pop():
        _stack.pop()


class Device:
    def __init__(self, index):
        self.index = index

    @staticmethod
    def count():
        return N_DEVICES

    def name(self):
        return f"Fake GPU {self.index}"

    def compute_capability(self):
        return (9, 0)

    def retain_primary_context(self):
        return Context(self.index)

    def get_attribute(self, attr):
        return _ATTRS[attr]


def _need_ctx(what):
    if not _stack:
        raise LogicError(f"{what}: no current context")


class Stream:
    def __init__(self, flags=0):
        _need_ctx("Stream()")

    def synchronize(self):
        _need_ctx("Stream.synchronize")
        calls.append(("sync",))
        if GATE.closed:
            GATE.block()


GATE = NativeGate()  # the wait that no signal interrupts (devicekit.testing.native_gate)


class Event:
    def record(self, stream=None):
        self.t = time.perf_counter()
        self.hangs = GATE.closed

    def query(self):
        return not (self.hangs and GATE.closed)

    def synchronize(self):
        if not self.query():
            GATE.block()

    def time_till(self, other):
        return (other.t - self.t) * 1e3


class DeviceAllocation:
    def __init__(self, n):
        self.arr = np.zeros(n, np.uint8)
        self.ptr = self.arr.ctypes.data
        _live[self.ptr] = self.arr
        self.freed = False

    def __int__(self):
        return self.ptr

    def free(self):
        self.freed = True
        _live.pop(self.ptr, None)


def mem_alloc(n):
    _need_ctx("mem_alloc")
    calls.append(("mem_alloc", n))
    return DeviceAllocation(n)


def pagelocked_empty(n, dtype, order="C", mem_flags=0):
    """Like pycuda: an ndarray whose .base is the host allocation (with get_device_pointer when mapped)."""
    dt = np.dtype(dtype)

    class HostAllocation(ctypes.c_uint8 * max(1, n * dt.itemsize)):
        def get_device_pointer(self):
            return ctypes.addressof(self)

    return np.frombuffer(HostAllocation(), dt, count=n)


def _addr(x) -> int:
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, DeviceAllocation):
        return x.ptr
    return np.asarray(x).ctypes.data


def _nbytes(x) -> int:
    return memoryview(x).nbytes


def memcpy_htod_async(dest, src, stream=None):
    _need_ctx("memcpy_htod_async")
    calls.append(("htod", _addr(dest), _nbytes(src)))
    ctypes.memmove(_addr(dest), _addr(src), _nbytes(src))


def memcpy_dtoh(dest, src):
    _need_ctx("memcpy_dtoh")
    calls.append(("dtoh", _addr(src), _nbytes(dest)))
    ctypes.memmove(_addr(dest), _addr(src), _nbytes(dest))


def memcpy_dtod_async(dest, src, size, stream=None):
    ctypes.memmove(_addr(dest), _addr(src), size)


def memcpy_peer(dest, src, size, dest_context=None, src_context=None):
    ctypes.memmove(_addr(dest), _addr(src), size)


class Function:
    def __init__(self, name):
        self.name = name

    def get_attribute(self, attr):
        return 1024

    def prepare(self, fmt):
        self.fmt = fmt

    def prepared_async_call(self, grid, block, stream, *args, shared_size=0):
        _need_ctx("launch")
        calls.append(("launch", self.name, tuple(grid), tuple(block), args, shared_size))
        # the function is looked up by its symbol (spec.entry: dku_<kernel> for generated kernels)
        host = KERNELS.get(self.name) or next(h for h in KERNELS.values() if h.spec.entry == self.name)
        assert len(args) == len(self.fmt), (self.fmt, args)
        # args in declaration order (the format's P are pointers): buffers to bufs[], scalars to 64-bit slots, a
        # float/double/half as its bits (the emulation reads them back with the kernel's C type)
        ptrs = [a for a, f in zip(args, self.fmt) if f == "P"]
        slots = [_slot(a, f) for a, f in zip(args, self.fmt) if f != "P"]
        assert all(isinstance(a, int) for a in ptrs), args
        bufs = (ctypes.c_void_p * max(1, len(ptrs)))(*ptrs)
        vals = (ctypes.c_longlong * max(1, len(slots)))(*slots)
        host.fn(bufs, vals, (ctypes.c_longlong * 3)(*grid), (ctypes.c_longlong * 3)(*block), int(host.threaded))


def _slot(value, fmt: str) -> int:
    """A scalar launch argument as the 64-bit slot the host emulation reads (floats as their bits)."""
    import struct
    if fmt in "efd":
        assert isinstance(value, float), (value, fmt)
        raw = struct.pack("<" + fmt, value)
        return struct.unpack("<q", raw.ljust(8, b"\0"))[0]
    assert isinstance(value, int) and not isinstance(value, bool), (value, fmt)
    return value


class Module:
    def __init__(self, cubin):
        from devicekit_cuda.cubin import inspect
        self.info = inspect(bytes(cubin))

    def get_function(self, name):
        if name not in self.info.functions:
            raise LogicError(f"cuModuleGetFunction: {name} not in the cubin ({self.info.functions})")
        return Function(name)


def module_from_buffer(buf, options=None, message_handler=None):
    _need_ctx("module_from_buffer")
    calls.append(("module", len(buf)))
    return Module(buf)


def install(monkeypatch):
    """Put this module in place of pycuda for the duration of a test."""
    mod = sys.modules[__name__]
    pkg = types.ModuleType("pycuda")
    pkg.driver = mod
    pkg.VERSION_TEXT = "fake"
    monkeypatch.setitem(sys.modules, "pycuda", pkg)
    monkeypatch.setitem(sys.modules, "pycuda.driver", mod)
    calls.clear()
    _stack.clear()
