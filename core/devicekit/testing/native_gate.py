"""A fake driver's wait that no signal interrupts, and the Ctrl-C check that uses it.

Real drivers block in native code (cuEventSynchronize, waitUntilCompleted) where a SIGINT is not seen until the wait
returns; a test double of such a driver must block the same way, or a runtime that forgets to poll passes its
Ctrl-C test. The CUDA and Metal fakes share this one gate and this one check.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
from collections.abc import Callable

import pytest


class NativeGate:
    """A pthread mutex locked twice by one thread blocks (releasing the GIL) until another thread unlocks it
    (`release`, the test's hang guard). While `closed`, the fake's kernels "never end"."""

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None)
        self.mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER on glibc
        self.closed = False

    def close(self) -> None:
        self.mutex = ctypes.create_string_buffer(64)  # a fresh one: an interrupted block() may have left one locked
        self.closed = True
        self.libc.pthread_mutex_lock(self.mutex)

    def release(self) -> None:
        self.closed = False
        self.libc.pthread_mutex_unlock(self.mutex)

    def block(self) -> None:
        mutex = self.mutex
        self.libc.pthread_mutex_lock(mutex)  # releases the GIL; returns only once released
        self.libc.pthread_mutex_unlock(mutex)


def check_ctrl_c_interrupts(gate: NativeGate, launch: Callable[[], object]) -> None:
    """Close the gate, run `launch` (a launch that waits), send SIGINT 0.3 s in: KeyboardInterrupt must come while the
    kernel still runs (the runtime polls), not when the 10 s hang guard opens the gate and the wait returns."""
    from devicekit import interrupt
    gate.close()
    guard = threading.Timer(10, gate.release)
    sigint = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        guard.start()
        sigint.start()
        with pytest.raises(KeyboardInterrupt):
            launch()
            sigint.join()  # (the old code) the signal arrives here, after the guard released the wait
        assert gate.closed, "KeyboardInterrupt came only after the kernel ended (the hang guard released it)"
        assert interrupt.pending() == 1  # the launch goes on in the background
    finally:
        sigint.cancel()
        guard.cancel()
        if gate.closed:
            gate.release()
        signal.signal(signal.SIGINT, old)
