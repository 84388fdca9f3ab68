"""The Metal framework through pyobjc (macOS only; imported only when a METAL device or compiler is built there).

One `MetalContext` per device index: the MTLDevice, one command queue, and the command buffers still in flight
(copies and `synchronize` wait on them, as tinygrad's `mtl_buffers_in_flight`).

Written from Apple's Metal API documentation and pyobjc's naming rules (selector `a:b:c:` -> `a_b_c_`; out-params such
as `error:` are passed as None and come back as the last item of a returned tuple). It cannot run on the Linux machine
this plugin was developed on; the tests marked `macos` exercise it on a Mac.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import threading
from collections import OrderedDict
from typing import Any

from devicekit import interrupt
from devicekit.errors import CompileError, DeviceUnavailableError

from . import env

_STATUS_COMPLETED = 4  # MTLCommandBufferStatusCompleted (5 is Error)
_LANGUAGE_VERSIONS = {"2.4": (2 << 16) + 4, "3.0": 3 << 16, "3.1": (3 << 16) + 1, "3.2": (3 << 16) + 2}


def _metal():
    reason = env.unavailable_reason()
    if reason is not None:
        raise DeviceUnavailableError(f"METAL: {reason}")
    import Metal  # pyobjc-framework-Metal
    return Metal


def _err_text(err: Any) -> str:
    if err is None:
        return ""
    try:
        return str(err.localizedDescription())
    except Exception:  # noqa: BLE001 - any NSError-like object
        return str(err)


class MetalContext:
    def __init__(self, index: int = 0):
        Metal = _metal()
        self.Metal = Metal
        device = None
        if index == 0:
            device = Metal.MTLCreateSystemDefaultDevice()
        if device is None:
            all_devices = list(Metal.MTLCopyAllDevices() or [])
            if index < len(all_devices):
                device = all_devices[index]
            elif index == 0 and all_devices:
                device = all_devices[0]
            else:
                raise DeviceUnavailableError(f"METAL:{index}: this Mac has {len(all_devices)} Metal device(s)")
        self.index = index
        self.device = device
        self.name = str(device.name())
        self.queue = device.newCommandQueueWithMaxCommandBufferCount_(1024)
        if self.queue is None:
            raise DeviceUnavailableError(f"METAL:{index}: could not create a command queue on {self.name}")
        self.max_threadgroup_memory = int(device.maxThreadgroupMemoryLength())
        self._in_flight: list[Any] = []
        self._lock = threading.Lock()

    def track(self, command_buffer) -> None:
        with self._lock:
            self._in_flight.append(command_buffer)
            if len(self._in_flight) >= 256:  # forget the ones that completed cleanly (failed ones raise at sync)
                self._in_flight = [cb for cb in self._in_flight if cb.status() != _STATUS_COMPLETED]

    def synchronize(self) -> None:
        """Wait for every command buffer committed so far; raise if one of them failed."""
        with self._lock:
            pending, self._in_flight = self._in_flight, []
        for i, cb in enumerate(pending):
            try:
                wait_checked(cb)
            except KeyboardInterrupt:  # Ctrl-C: the ones not waited for are still in flight
                with self._lock:
                    self._in_flight[:0] = pending[i:]
                raise


def wait_checked(command_buffer, keep=None) -> None:
    """Wait for a committed command buffer (Ctrl-C interrupts the wait: devicekit.interrupt.wait_until polls its
    status on the main thread); raise if it failed."""
    interrupt.wait_until(lambda: command_buffer.status() >= _STATUS_COMPLETED, command_buffer.waitUntilCompleted,
                         keep)
    command_buffer.waitUntilCompleted()
    err = command_buffer.error()
    if err is not None:
        raise RuntimeError(f"METAL: a kernel failed on the GPU: {_err_text(err)}")


@functools.cache
def metal_context(index: int = 0) -> MetalContext:
    return MetalContext(index)


def compile_options(Metal, src: str):
    """MTLCompileOptions: safe (non-fast) math, and MSL 3.1 when the source uses bfloat."""
    from .compiler import needs_msl_version
    options = Metal.MTLCompileOptions.alloc().init()
    if hasattr(options, "setMathMode_") and hasattr(Metal, "MTLMathModeSafe"):  # macOS 15+
        options.setMathMode_(Metal.MTLMathModeSafe)
    else:
        options.setFastMathEnabled_(False)
    if hasattr(options, "setMathFloatingPointFunctions_") and hasattr(Metal, "MTLMathFloatingPointFunctionsPrecise"):
        options.setMathFloatingPointFunctions_(Metal.MTLMathFloatingPointFunctionsPrecise)  # default is fast
    if (v := needs_msl_version(src)) is not None:
        options.setLanguageVersion_(getattr(Metal, "MTLLanguageVersion" + v.replace(".", "_"), _LANGUAGE_VERSIONS[v]))
    return options


_LIBRARIES: OrderedDict[tuple[int, str], Any] = OrderedDict()  # (device, sha256(src)) -> MTLLibrary
_LIBRARIES_MAX = 256
_LIBRARIES_LOCK = threading.Lock()


def compile_library(device, src: str):
    """MTLLibrary from MSL source, or CompileError with Metal's log. The last few libraries are kept, so the runtime
    loading a source the compiler just checked does not compile it a second time."""
    key = (id(device), hashlib.sha256(src.encode()).hexdigest())
    with _LIBRARIES_LOCK:
        if (lib := _LIBRARIES.get(key)) is not None:
            _LIBRARIES.move_to_end(key)
            return lib
    Metal = _metal()
    library, err = device.newLibraryWithSource_options_error_(src, compile_options(Metal, src), None)
    if library is None:
        raise CompileError("Metal rejected the kernel source (MTLDevice.newLibraryWithSource)", log=_err_text(err),
                           src=src)
    with _LIBRARIES_LOCK:
        _LIBRARIES[key] = library
        while len(_LIBRARIES) > _LIBRARIES_MAX:
            _LIBRARIES.popitem(last=False)
    return library


def load_library(device, lib: bytes):
    """MTLLibrary from the bytes a Metal compiler produced (metallib, or the in-process source container)."""
    from .compiler import MAGIC_METALLIB, MAGIC_SOURCE
    if lib.startswith(MAGIC_SOURCE):
        return compile_library(device, lib[len(MAGIC_SOURCE):].decode())
    if not lib.startswith(MAGIC_METALLIB):
        raise ValueError("METAL: these bytes are neither a metallib nor a devicekit-metal source container")
    try:  # newLibraryWithData needs a dispatch_data_t: pyobjc-framework-libdispatch, when installed
        import libdispatch  # type: ignore[import-not-found]
        data = libdispatch.dispatch_data_create(lib, len(lib), None, None)
        library, err = device.newLibraryWithData_error_(data, None)
    except ImportError:  # no libdispatch bindings: go through a file URL instead
        import Foundation
        fd, path = tempfile.mkstemp(suffix=".metallib", prefix="dk_metal_")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(lib)
            library, err = device.newLibraryWithURL_error_(Foundation.NSURL.fileURLWithPath_(path), None)
        finally:
            os.unlink(path)
    if library is None:
        raise RuntimeError(f"METAL: could not load the metallib: {_err_text(err)}")
    return library


def pipeline_for(device, library, name: str):
    fn = library.newFunctionWithName_(name)
    if fn is None:
        names = ", ".join(str(n) for n in (library.functionNames() or []))
        raise RuntimeError(f"METAL: kernel {name!r} is not in the library (it has: {names or 'nothing'})")
    pso, err = device.newComputePipelineStateWithFunction_error_(fn, None)
    if pso is None:
        raise RuntimeError(f"METAL: could not build a compute pipeline for {name!r}: {_err_text(err)}")
    return pso
