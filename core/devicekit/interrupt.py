"""Launches that Ctrl-C can interrupt.

Python runs signal handlers only on the main thread and only between bytecodes, so a kernel running inside a native
call on the main thread holds back KeyboardInterrupt until it returns: forever for an infinite loop. `call(fn, args,
keep)` runs `fn(*args)` on a launcher thread when it is called from the main thread, and waits for it in a lock
acquire, which a signal interrupts. When a signal handler raises (Ctrl-C: KeyboardInterrupt) the exception reaches
the caller at once (within milliseconds) while the call goes on in the background until it returns; `keep` (the
Buffers the call reads and writes) stays referenced until then, so their memory is neither freed nor handed to
another Buffer while the abandoned kernel may still write it. `pending()` counts such calls; `wait_pending()` waits
for them. There is no way to stop native code from outside: an infinite loop keeps its launcher thread (a daemon,
which does not keep the process alive) and one core busy until the process ends.

`Program.execute` uses it for launches its runtime says may run long (`Program.may_run_long`); short launches, and
every launch from another thread, run on the calling thread as before.

`wait_until(done, block, keep)` is the same discipline for runtimes that launch asynchronously (OpenCL, CUDA, Metal):
their blocking waits (clWaitForEvents, cuEventSynchronize, waitUntilCompleted) hold the main thread in native code
too, so on the main thread they poll the event's status instead, sleeping between polls (a sleep is where Python runs
signal handlers): Ctrl-C raises at once, the kernel goes on in the background, `keep` stays referenced and `pending()`
counts it until its `done()` is true. Other threads call `block()`, the driver's own wait. Reads no environment
variables.
"""

from __future__ import annotations

import _thread
import os
import threading
import time
from collections.abc import Callable, Sequence
from queue import SimpleQueue
from typing import Any

__all__ = ["abandoned", "call", "on_main_thread", "pending", "wait_event", "wait_pending", "wait_until"]

_main_ident = threading.main_thread().ident
_idle: list[_Launcher] = []  # launchers waiting for work (list.append/pop are atomic)
_abandoned: set[_Job] = set()  # calls whose caller was interrupted, still running
_abandoned_lock = threading.Lock()
_polled: list[tuple[Callable[[], bool], Any]] = []  # (done, keep) of interrupted waits_until, until done() is true

SPIN_S = 50e-6  # polls without sleeping first: a short kernel pays no sleep
MAX_SLEEP_S = 1e-3  # the longest pause between polls: Ctrl-C is seen within about a millisecond


def on_main_thread() -> bool:
    """Whether the caller is the main thread (the only one Python delivers signals to)."""
    return _thread.get_ident() == _main_ident


class _Job:
    __slots__ = ("args", "done", "error", "fn", "keep", "result")

    def __init__(self, fn: Callable, args: Sequence[Any], keep: Any):
        self.fn, self.args, self.keep = fn, args, keep
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = _thread.allocate_lock()
        self.done.acquire()


class _Launcher:
    """One daemon thread that runs jobs one at a time and puts itself back on the idle list after each."""

    def __init__(self) -> None:
        self.jobs: SimpleQueue[_Job] = SimpleQueue()
        threading.Thread(target=self._loop, name="devicekit-launcher", daemon=True).start()

    def _loop(self) -> None:
        while True:
            job = self.jobs.get()
            try:
                job.result = job.fn(*job.args)
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                job.error = e
            job.fn = job.args = None
            job.done.release()
            with _abandoned_lock:
                _abandoned.discard(job)
            job.keep = None  # the buffers may go now (their finalizers run on this thread)
            _idle.append(self)


def call(fn: Callable, args: Sequence[Any] = (), keep: Any = None) -> Any:
    """`fn(*args)`, interruptible by signals when called from the main thread (see the module docstring)."""
    if _thread.get_ident() != _main_ident:
        return fn(*args)
    try:
        launcher = _idle.pop()
    except IndexError:
        launcher = _Launcher()
    job = _Job(fn, args, keep)
    launcher.jobs.put(job)
    try:
        job.done.acquire()  # a signal interrupts this wait; its handler's exception propagates
    except BaseException:
        with _abandoned_lock:
            if job.done.locked():
                _abandoned.add(job)
        raise
    if job.error is not None:
        err, job.error = job.error, None
        raise err
    return job.result


def wait_until(done: Callable[[], bool], block: Callable[[], Any] | None = None, keep: Any = None) -> None:
    """Return once `done()` is true (an event's status polled), so that signals interrupt the wait: on the main
    thread it polls, first without pausing for SPIN_S, then with sleeps growing to MAX_SLEEP_S; on another thread
    (no signal reaches it) it calls `block()`, the driver's blocking wait, when given. When the wait is interrupted
    (KeyboardInterrupt) `keep` stays referenced, and `pending()` counts the wait, until `done()` is true."""
    if block is not None and _thread.get_ident() != _main_ident:
        block()
        return
    if done():
        return
    try:
        t_end = time.perf_counter() + SPIN_S
        while time.perf_counter() < t_end:
            if done():
                return
        pause = 10e-6
        while not done():
            time.sleep(pause)
            pause = min(pause * 2, MAX_SLEEP_S)
    except BaseException:
        with _abandoned_lock:
            _polled.append((done, keep))
        raise


def wait_event(done: Callable[[], bool], block: Callable[[], Any], keep: Any = None) -> None:
    """Wait for a queued command's event (`done()`: its status polled; `block()`: the driver's blocking wait) as
    `wait_until` does, then call `block()` once more: it returns at once, and a command that ended in error raises
    there, from the driver's own wait (clWaitForEvents, cuEventSynchronize)."""
    wait_until(done, block, keep)
    block()


def abandoned(done: Callable[[], bool], keep: Any) -> None:
    """Count a command a KeyboardInterrupt left running (its `done()` polled by `pending()`), keeping `keep` alive,
    unless `wait_until` already counted it for the same `keep`. For a Ctrl-C that lands while a driver call runs (a
    lazy kernel build inside an enqueue can take seconds): Python raises it at the next Python call after the enqueue
    returned, before any wait began, and a kernel nobody counts would be waited for at exit, forever."""
    with _abandoned_lock:
        if keep is None or not any(k is keep for _, k in _polled):
            _polled.append((done, keep))


def _prune_polled() -> int:
    """Forget the interrupted waits whose kernel has finished; how many are left. Each `done()` is asked outside the
    lock (a runtime's may take its own context lock)."""
    with _abandoned_lock:
        polled = list(_polled)
    finished = []
    for entry in polled:
        try:
            if entry[0]():
                finished.append(entry)
        except Exception:  # noqa: BLE001 - a failed kernel has finished too
            finished.append(entry)
    with _abandoned_lock:
        for entry in finished:
            if entry in _polled:
                _polled.remove(entry)
        return len(_polled)


def pending() -> int:
    """How many interrupted calls (and interrupted waits) are still running in the background."""
    polled = _prune_polled()
    with _abandoned_lock:
        return len(_abandoned) + polled


def wait_pending(timeout: float | None = None) -> bool:
    """Wait until every interrupted call has returned (or `timeout` seconds passed); True when none is left."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with _abandoned_lock:
            jobs = list(_abandoned)
        if not jobs:
            while _prune_polled():
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                time.sleep(MAX_SLEEP_S)
            return True
        for job in jobs:
            left = -1 if deadline is None else max(0.0, deadline - time.monotonic())
            if job.done.acquire(timeout=left):
                job.done.release()
            elif deadline is not None:
                return pending() == 0


def _after_fork_in_child() -> None:
    """The child has only the forking thread: no launchers, no background calls, and that thread is its main one."""
    global _main_ident, _abandoned_lock
    _main_ident = _thread.get_ident()
    _idle.clear()
    _abandoned.clear()
    _polled.clear()
    _abandoned_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
