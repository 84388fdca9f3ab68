"""Locks that still work in a child process after os.fork.

A lock held by another thread when the process forks stays held forever in the child (that thread does not exist
there), so the child's first use of it hangs: multiprocessing's default start method on Linux is fork. `lock()` and
`rlock()` return ordinary threading locks that are registered here and re-initialized (released) in the child by an
`os.register_at_fork` handler. Use them for locks that guard short in-memory updates (a dict, a counter): the data
they protect was consistent between bytecodes when the fork happened, since the forking thread held the GIL.
`private_tmpdir()` replaces `tempfile.TemporaryDirectory` where other threads may be inside it at fork time: a
child that exits normally runs the finalizers of the TemporaryDirectory objects it copied from the parent's threads
and deletes their directories under the parent (a C compile in another thread then fails). State that is not (the
LLVM JIT, the compile cache's files, the registry being built) has its own at-fork handler
in the module that owns it. Reads no environment variables.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterator

__all__ = ["lock", "private_tmpdir", "rlock"]

_locks: weakref.WeakSet = weakref.WeakSet()


def lock() -> threading.Lock:
    """A threading.Lock that is released in a forked child."""
    lk = threading.Lock()
    _locks.add(lk)
    return lk


def rlock() -> threading.RLock:
    """A threading.RLock that is released in a forked child."""
    lk = threading.RLock()
    _locks.add(lk)
    return lk


@contextlib.contextmanager
def private_tmpdir(prefix: str = "devicekit_") -> Iterator[str]:
    """A fresh private (0700) temp directory, removed when the block ends, and only by the process that made it: no
    finalizer object is left for a forked child to run."""
    owner = os.getpid()
    d = tempfile.mkdtemp(prefix=prefix)
    try:
        yield d
    finally:
        if os.getpid() == owner:
            shutil.rmtree(d, ignore_errors=True)


def _after_fork_in_child() -> None:
    for lk in list(_locks):
        lk._at_fork_reinit()  # what the stdlib's own fork handlers use (concurrent.futures, logging)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
