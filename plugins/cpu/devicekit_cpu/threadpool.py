"""A small persistent thread pool for native calls (ctypes releases the GIL during the call)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from queue import SimpleQueue


class ThreadPool:
    """`run(fn, chunks)` calls fn(*chunk) for every chunk, the first on the calling thread, the others on workers,
    and returns when all are done (re-raising the first error). Safe to call from several threads at once."""

    def __init__(self, n: int = 0):
        self._queues: list[SimpleQueue] = []
        self._lock = threading.Lock()

    def _start(self, count: int) -> None:
        with self._lock:
            while len(self._queues) < count:
                q: SimpleQueue = SimpleQueue()
                t = threading.Thread(target=self._worker, args=(q,), name=f"devicekit-cpu-{len(self._queues)}",
                                     daemon=True)
                t.start()
                self._queues.append(q)

    @property
    def size(self) -> int:
        """Worker threads started so far (the caller's thread is not counted)."""
        return len(self._queues)

    @staticmethod
    def _worker(q: SimpleQueue) -> None:
        while True:
            fn, args, done = q.get()
            try:
                fn(*args)
                done.put(None)
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                done.put(e)

    def run(self, fn: Callable, chunks: list[tuple]) -> None:
        if len(chunks) > 1 and len(self._queues) < len(chunks) - 1:
            self._start(len(chunks) - 1)
        done: SimpleQueue = SimpleQueue()
        for q, args in zip(self._queues, chunks[1:]):
            q.put((fn, args, done))
        err = None
        try:
            fn(*chunks[0])
        except BaseException as e:  # noqa: BLE001
            err = e
        for _ in range(len(chunks) - 1):
            e = done.get()
            err = err or e
        if err is not None:
            raise err


_POOL = ThreadPool(0)


def _reset_after_fork() -> None:
    """A forked child has none of the parent's worker threads: start from an empty pool (else a launch would wait
    forever on queues nobody reads)."""
    global _POOL
    _POOL = ThreadPool(0)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def pool() -> ThreadPool:
    """The process-wide pool; it starts worker threads the first time a launch needs them."""
    return _POOL
