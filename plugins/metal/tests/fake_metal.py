"""A fake `Metal` module (pyobjc's surface as devicekit-metal uses it) whose GPU runs kernels on the host.

Used by test_metal_fake_gpu.py and test_metal_conformance_fake.py to drive the plugin's macOS code path (compiler,
MetalContext, allocator, MetalProgram, and the registry) on Linux. A dispatch is "executed" by reading the kernel's
signature from its MSL (MetalRenderer.parse_source, libclang) and running it through the host emulation
(hostcheck.HostKernel) with the buffers, offsets, setBytes values and threadgroup counts the runtime encoded.
"""

from __future__ import annotations

import struct
import sys
import time
import types

import numpy as np
from devicekit.testing.native_gate import NativeGate
from devicekit_metal.hostcheck import HostKernel
from devicekit_metal.renderer import MetalRenderer

SPECS: dict[str, object] = {}  # entry symbol -> ProgramSpec (else the signature is read from the source)
_HOST_KERNELS: dict[str, HostKernel] = {}
_PARSED: dict[tuple[str, str], object] = {}


def _parsed(src: str, name: str):
    """The signature of a pipeline's source, read once (libclang in a helper process: ~0.4 s a read, and a test
    launches one pipeline hundreds of times)."""
    if (src, name) not in _PARSED:
        _PARSED[src, name] = MetalRenderer().parse_source(src, name)
    return _PARSED[src, name]


class _Err:
    def __init__(self, msg):
        self.msg = msg

    def localizedDescription(self):
        return self.msg


class _VarList:
    def __init__(self, data):
        self.data = data

    def as_buffer(self, n):
        return memoryview(self.data)[:n]


class FakeBuffer:
    def __init__(self, n):
        self.data = bytearray(n)

    def contents(self):
        return _VarList(self.data)

    def length(self):
        return len(self.data)


class FakeLibrary:
    def __init__(self, src):
        self.src = src

    def newFunctionWithName_(self, name):
        return (self.src, name) if f"kernel void {name}(" in self.src else None

    def functionNames(self):
        return ["saxpy"]


class FakePSO:
    def __init__(self, fn):
        self.src, self.name = fn

    def maxTotalThreadsPerThreadgroup(self):
        return 1024


ENCODERS: list = []  # every encoder made, newest last (tests look at what was bound)


class FakeEncoder:
    def __init__(self, cb):
        self.cb, self.bufs, self.bytes, self.tg = cb, {}, {}, {}
        ENCODERS.append(self)

    def setComputePipelineState_(self, pso):
        self.pso = pso

    def setBuffer_offset_atIndex_(self, buf, offset, index):
        self.bufs[index] = (buf, offset)

    def setBytes_length_atIndex_(self, arg, n, index):
        self.bytes[index] = bytes(memoryview(arg).cast("B"))[:n]

    def setThreadgroupMemoryLength_atIndex_(self, n, index):
        assert n % 16 == 0, n  # Metal wants multiples of 16 bytes
        self.tg[index] = n

    def dispatchThreadgroups_threadsPerThreadgroup_(self, grid, group):
        # more than a uint of threads per axis: Metal cannot run it, and emulating it would never end
        assert all(0 <= g * t < 2 ** 32 for g, t in zip(grid, group)), f"undispatchable grid {grid} x {group}"
        self.cb.work.append((self.pso, dict(self.bufs), dict(self.bytes), grid, group))

    def endEncoding(self):
        pass


def _unpack(raw: bytes, dt):
    """A var's bytes as the runtime set them: 8 bytes for generated kernels, the param's own size for hand-written."""
    if dt is None:
        return struct.unpack("<q", raw)[0]
    fmt = {"bool": "?", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
           "int64": "q", "uint64": "Q", "float16": "e", "float32": "f"}[dt.name]
    assert len(raw) == struct.calcsize("<" + fmt), (raw, dt)
    return struct.unpack("<" + fmt, raw)[0]


GATE = NativeGate()  # the wait that no signal interrupts (devicekit.testing.native_gate)


LAST_GPU_S = [0.0]  # the GPU seconds the last committed command buffer reports (its host run's time)


class FakeCommandBuffer:
    def __init__(self, log):
        self.work, self.log, self.done, self.hangs = [], log, False, False
        self.t0 = self.t1 = 0.0

    def computeCommandEncoder(self):
        return FakeEncoder(self)

    def commit(self):
        self.t0 = time.perf_counter()  # the "GPU" times are the host run's: within the launch's wall time
        for pso, bufs, byts, grid, group in self.work:
            spec = SPECS.get(pso.name) or _parsed(pso.src, pso.name)
            # where each param was bound: generated kernels at 0.. in order, hand-written ones at their attributes
            sp = spec.get_meta("source_params")
            slot = {k: i for i, k in enumerate([("buffer", i) for i in range(len(spec.params))] +
                                               [("var", j) for j in range(len(spec.vars))])}
            if sp is not None:
                slot = {tuple(k): p.slot for k, p in zip(spec.arg_order(), sp) if p.slot is not None}
            arrays = []
            for i, p in enumerate(spec.params):
                buf, off = bufs[slot["buffer", i]]
                count = (len(buf.data) - off) // p.dtype.itemsize
                arrays.append(np.frombuffer(buf.data, dtype=p.dtype.np, count=count, offset=off))
            vals = [_unpack(byts[slot["var", j]], v.dtype) for j, v in enumerate(spec.vars)]
            # a bool k.scalar travels as a uint8 (ir.dtypes.scalar_wire): the launch value is the bool again
            vals = [bool(x) if v.scalar is not None and v.scalar.is_bool else x for x, v in zip(vals, spec.vars)]
            self.log.append((pso.name, grid, group, vals))
            hk = _HOST_KERNELS.get(pso.src)
            if hk is None:
                hk = _HOST_KERNELS[pso.src] = HostKernel(spec, MetalRenderer())
            hk.run(arrays, vals, grid=grid, group=group)
        self.t1 = time.perf_counter()
        LAST_GPU_S[0] = self.t1 - self.t0
        self.done, self.hangs = True, GATE.closed

    def status(self):
        return 2 if not self.done or (self.hangs and GATE.closed) else 4

    def waitUntilCompleted(self):
        assert self.done
        if self.hangs and GATE.closed:
            GATE.block()

    def error(self):
        return None

    def GPUStartTime(self):
        return self.t0

    def GPUEndTime(self):
        return self.t1


class FakeQueue:
    def __init__(self, log):
        self.log = log

    def commandBuffer(self):
        return FakeCommandBuffer(self.log)


class FakeDevice:
    def __init__(self):
        self.log = []

    def name(self):
        return "Fake Apple GPU"

    def newCommandQueueWithMaxCommandBufferCount_(self, n):
        return FakeQueue(self.log)

    def maxThreadgroupMemoryLength(self):
        return 32768

    def newBufferWithLength_options_(self, n, options):
        return FakeBuffer(n)

    def newLibraryWithSource_options_error_(self, src, options, err):
        if "#error" in src:
            return None, _Err("program_source:3:2: error: deliberate")
        return FakeLibrary(src), None

    def newComputePipelineStateWithFunction_error_(self, fn, err):
        return FakePSO(fn), None


class _Options:
    def init(self):
        self.fast_math, self.version = True, None
        return self

    def setFastMathEnabled_(self, v):
        self.fast_math = v

    def setLanguageVersion_(self, v):
        self.version = v


def install(monkeypatch=None, hide_xcode: bool = True) -> FakeDevice:
    """Put the fake `Metal` module in sys.modules and make devicekit-metal believe it runs on macOS (without Xcode's
    toolchain unless `hide_xcode` is False)."""
    from devicekit_metal import compiler, env, mtl
    dev = FakeDevice()
    mod = types.ModuleType("Metal")
    mod.MTLCreateSystemDefaultDevice = lambda: dev
    mod.MTLCopyAllDevices = lambda: [dev]
    mod.MTLResourceStorageModeShared = 0
    mod.MTLSizeMake = lambda *d: tuple(d)
    mod.MTLCompileOptions = types.SimpleNamespace(alloc=lambda: _Options())
    patches = [(sys.modules, "Metal", mod)]
    attrs = [(env, "unavailable_reason", lambda: None), (env, "compile_unavailable_reason", lambda: None),
             (compiler, "macos_version", lambda: "14.5")]  # a Mac names its version (the compiler's identity)
    if hide_xcode:
        attrs.append((env, "xcrun_metal", lambda: None))
    if monkeypatch is not None:
        for d, k, v in patches:
            monkeypatch.setitem(d, k, v)
        for o, k, v in attrs:
            monkeypatch.setattr(o, k, v)
    else:
        for d, k, v in patches:
            d[k] = v
        for o, k, v in attrs:
            setattr(o, k, v)
    mtl.metal_context.cache_clear()
    mtl._LIBRARIES.clear()
    return dev
