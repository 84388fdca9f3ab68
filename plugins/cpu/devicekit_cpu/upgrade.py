"""The upgrade thread: final builds (tiers: O3 after a program's quick O0 build) made off the launching thread.

One daemon thread builds, one program at a time, in the order their programs reached the tier limits. A launch
never waits for it: the program keeps running its quick build (the same bits) and adopts the final one at its first
launch after the build is done (CPUProgram._tick). The O3 compile itself runs in the compile worker process
(compile_worker.py, asked by LLVMCompiler.compile_src when `on_upgrade_thread()`): a thread of this process held the
GIL long enough in llvmlite's pipeline and the Python around it that 25-55 of ~100,000 launches waited over 5 ms
(bench/upgrade_stall.py); this thread now waits on a pipe, then loads the object (a link, ~1 ms). Where the worker is
off or dead the build runs on this thread as before. A forked child has no upgrade thread: a build its parent had
started is started again in the child when asked for.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

from devicekit import forksafe

_QUEUE: SimpleQueue = SimpleQueue()
_THREAD: list[threading.Thread] = []
_START = forksafe.lock()
_HERE = threading.local()  # .upgrading: True on the upgrade thread


def on_upgrade_thread() -> bool:
    """Whether the caller is this process's upgrade thread (its compiles go to the compile worker)."""
    return getattr(_HERE, "upgrading", False)


class QuickTier:
    """The pending swap of a program on its quick build: how to build the final Program, what ran so far, and the
    build's outcome (a Program, or the Exception it raised) once the upgrade thread or a caller made it."""

    __slots__ = ("build", "building", "done", "launches", "lock", "outcome", "pid", "work")

    def __init__(self, build: Callable[[], Any]):
        # forksafe: a child forked while the upgrade thread held them (a build takes ~20 ms) starts with them free
        self.build, self.launches, self.work, self.lock = build, 0, 0, forksafe.lock()
        self.done, self.building = threading.Event(), forksafe.lock()  # `lock` is never held across a build
        self.outcome: Any = None
        self.pid = 0  # the process whose upgrade thread has this build queued (0: none)

    def start(self) -> None:
        """Queue the build on the upgrade thread, once per process (a forked child queues it again)."""
        pid = os.getpid()
        if self.pid == pid:
            return
        with self.lock:
            if self.pid == pid or self.done.is_set():
                return
            self.pid = pid
        _thread()
        _QUEUE.put(self)

    def result(self, wait: bool) -> Any:
        """The build's outcome: None while it is not done (`wait=False`); with `wait`, the outcome, building it on
        this thread when no upgrade thread of this process has it queued."""
        if self.done.is_set():
            return self.outcome
        if not wait:
            return None
        if self.pid == os.getpid():
            self.done.wait()
        else:
            self.run()
        return self.outcome

    def run(self) -> None:
        """Build, once: a second caller (the upgrade thread after a caller's `upgrade()`) finds it done."""
        with self.building:
            if self.done.is_set():
                return
            try:
                self.outcome = self.build()
            except Exception as e:  # noqa: BLE001 - kept: the launching thread warns (the quick build runs right)
                self.outcome = e
            self.done.set()


def _worker() -> None:
    _HERE.upgrading = True
    while True:
        tier = _QUEUE.get()
        if tier.pid == os.getpid():
            tier.run()


def _thread() -> None:
    """Start this process's upgrade thread on first use."""
    if _THREAD and _THREAD[0].is_alive():
        return
    with _START:
        if not (_THREAD and _THREAD[0].is_alive()):
            t = threading.Thread(target=_worker, name="devicekit-cpu-upgrade", daemon=True)
            t.start()
            _THREAD[:] = [t]


def _after_fork_in_child() -> None:
    global _QUEUE
    _QUEUE = SimpleQueue()
    _THREAD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
