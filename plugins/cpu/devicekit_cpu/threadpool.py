"""A small persistent thread pool for native calls (ctypes releases the GIL during the call)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from queue import SimpleQueue


class ThreadPool:
    """`run(fn, chunks)` calls fn(*chunk) once for every chunk and returns when all are done (re-raising the first
    error). Chunk 0 runs on the calling thread, chunk i on worker i; a chunk is claimed (a non-blocking lock) by
    whoever starts it first, so when a worker has not started yet (descheduled on a busy machine) the caller runs
    its chunk instead of waiting for it. Safe to call from several threads at once."""

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
            fn, args, claim, done = q.get()
            if not claim.acquire(False):  # the caller got to it first
                continue
            try:
                fn(*args)
                done.put(None)
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                done.put(e)

    def run(self, fn: Callable, chunks: list[tuple]) -> None:
        n = len(chunks)
        if n > 1 and len(self._queues) < n - 1:
            self._start(n - 1)
        done: SimpleQueue = SimpleQueue()
        claims = [threading.Lock() for _ in range(n)]
        for q, args, claim in zip(self._queues, chunks[1:], claims[1:]):
            q.put((fn, args, claim, done))
        err = None
        mine = 0
        for args, claim in zip(chunks, claims):  # chunk 0, then any chunk no worker has started
            if claim.acquire(False):
                mine += 1
                try:
                    fn(*args)
                except BaseException as e:  # noqa: BLE001
                    err = err or e
        for _ in range(n - mine):  # the chunks workers claimed
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
