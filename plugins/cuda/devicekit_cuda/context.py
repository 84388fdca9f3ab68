"""One CUDA context per device id (the device's primary context, via pycuda), entered with `with ctx:`.

pycuda keeps a per-thread context stack, so every driver call is made between a push and a pop; the per-device
RLock makes a device safe to use from several threads (calls on one device are serialized). pycuda is imported
here, and this module is only imported when a CUDA device is created.
"""

from __future__ import annotations

import threading

from devicekit import interrupt
from devicekit.launch_sizes import Limits

_lock = threading.Lock()
_contexts: dict[int, CUDAContext] = {}


def pycuda_driver():
    try:
        import pycuda.driver as cuda
    except ImportError as e:
        raise RuntimeError("the CUDA runtime needs pycuda: pip install 'devicekit-cuda[runtime]' "
                           f"(import failed: {e})") from e
    return cuda


class CUDAContext:
    def __init__(self, index: int):
        cuda = pycuda_driver()
        cuda.init()
        if not 0 <= index < cuda.Device.count():
            raise RuntimeError(f"CUDA:{index} does not exist: the driver reports {cuda.Device.count()} device(s)")
        self.cuda = cuda
        self.index = index
        self.device = cuda.Device(index)
        self.name = self.device.name()
        self.compute_capability = self.device.compute_capability()
        self.ctx = self.device.retain_primary_context()
        self.lock = threading.RLock()
        with self:
            self.stream = cuda.Stream()  # a blocking stream: ordered with the synchronous pycuda calls too
            attr = cuda.device_attribute
            self.max_grid = tuple(self.device.get_attribute(getattr(attr, f"MAX_GRID_DIM_{a}")) for a in "XYZ")
            self.max_block = tuple(self.device.get_attribute(getattr(attr, f"MAX_BLOCK_DIM_{a}")) for a in "XYZ")

    @property
    def arch(self) -> str:
        return "sm_{}{}".format(*self.compute_capability)

    def __enter__(self):
        self.lock.acquire()
        try:
            self.ctx.push()
        except BaseException:
            self.lock.release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.cuda.Context.pop()
        finally:
            self.lock.release()

    def synchronize(self) -> None:
        """Wait for everything queued on the stream (interruptibly: see wait_event)."""
        with self:
            ev = self.cuda.Event()
            ev.record(self.stream)
        self.wait_event(ev)
        with self:
            self.stream.synchronize()  # at once: raises a kernel's error

    def wait_event(self, ev, keep=None) -> None:
        """Wait for a recorded event without holding this context's lock, so that Ctrl-C interrupts the wait
        (devicekit.interrupt.wait_event polls cuEventQuery on the main thread, other threads block in
        cuEventSynchronize, and a launch's error raises); `keep` stays referenced until the event completes when the
        wait was interrupted."""
        def done() -> bool:
            with self:
                return bool(ev.query())

        def block() -> None:
            with self:
                ev.synchronize()
        interrupt.wait_event(done, block, keep)

    def limits(self, max_threads: int) -> Limits:
        """Launch limits of a kernel whose blocks take at most `max_threads` threads (its own attribute)."""
        return Limits(device=f"CUDA:{self.index} ({self.name})", max_local=self.max_block,
                      max_group_items=max_threads, max_groups=self.max_grid, groups="grid (global_size)",
                      items="block (local_size)")


def get(index: int) -> CUDAContext:
    with _lock:
        ctx = _contexts.get(index)
        if ctx is None:
            ctx = _contexts[index] = CUDAContext(index)
        return ctx
