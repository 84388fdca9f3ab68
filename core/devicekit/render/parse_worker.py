"""Run a source reader in a helper process with a time limit, so a pathological source (a macro bomb, a template
explosion) cannot hang or crash the user's process inside libclang.

`bounded(target, *args)` calls `target` ("package.module:function", importable in a fresh interpreter) with picklable
`args` in a long-lived worker process (one per parent process, started on first use, reused: a typical kernel's
signature comes back in a few milliseconds) and returns its picklable result; an exception the reader raises is
raised here. When the call takes longer than the limit the worker is killed (and replaced on the next call) and a
CompileError names the limit and how to change it. A worker that dies (a crash in libclang) is reported the same way.

Reads DEVICEKIT_PARSE_TIMEOUT: seconds one read may take (default 20); `0` turns the bound off and reads in process.
"""

from __future__ import annotations

import atexit
import importlib
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from typing import Any

from ..errors import CompileError

_HEADER = struct.Struct("<Q")


def parse_timeout() -> float:
    """DEVICEKIT_PARSE_TIMEOUT in seconds (default 20; 0 or less: no bound, the reader runs in process)."""
    from .. import settings  # a bad value is a SettingError naming the variable and what it accepts
    return settings.get("DEVICEKIT_PARSE_TIMEOUT")


def _call(target: str, args: tuple) -> Any:
    mod, _, fn = target.partition(":")
    return getattr(importlib.import_module(mod), fn)(*args)


def _write(f, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(_HEADER.pack(len(data)) + data)
    f.flush()


def _read_exact(f, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = f.read(n - len(out))
        if not chunk:
            raise EOFError
        out += chunk
    return out


def worker_main() -> None:
    """The worker's loop: requests (target, args) on stdin, answers ("ok", result) / ("err", exception) on stdout."""
    inp = sys.stdin.buffer
    out = os.fdopen(os.dup(1), "wb")  # answers go to the original stdout; anything a reader or libclang prints
    os.dup2(2, 1)                     # (fd 1) goes to stderr instead of corrupting them
    sys.stdout = sys.stderr
    while True:
        try:
            n = _HEADER.unpack(_read_exact(inp, _HEADER.size))[0]
        except EOFError:
            return
        path, target, args = pickle.loads(_read_exact(inp, n))
        if path != sys.path:
            sys.path[:] = path  # the caller's, as it is now: readers import from wherever it imports
        try:
            answer = ("ok", _call(target, args))
            pickle.dumps(answer)
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the caller
            answer = ("err", e)
            try:
                pickle.dumps(answer)
            except Exception:  # noqa: BLE001 - an unpicklable exception travels as text
                answer = ("err", CompileError(f"{type(e).__name__}: {e}"))
        _write(out, answer)


class _Worker:
    def __init__(self) -> None:
        self.pid = os.getpid()  # a forked child must not share its parent's pipes
        code = "from devicekit.render.parse_worker import worker_main; worker_main()"
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def call(self, target: str, args: tuple, timeout: float) -> tuple[str, Any]:
        _write(self.proc.stdin, (list(sys.path), target, args))
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        buf = b""
        need = _HEADER.size
        header_done = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, max(need - len(buf), 1 << 16))
            if not chunk:
                raise EOFError
            buf += chunk
            if not header_done and len(buf) >= _HEADER.size:
                need = _HEADER.size + _HEADER.unpack(buf[:_HEADER.size])[0]
                header_done = True
            if header_done and len(buf) >= need:
                return pickle.loads(buf[_HEADER.size:need])

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass


_lock = threading.Lock()
_worker: _Worker | None = None


def _shutdown() -> None:
    global _worker
    w, _worker = _worker, None
    if w is not None and w.pid == os.getpid():
        w.kill()


atexit.register(_shutdown)


def bounded(target: str, *args: Any, what: str = "reading the kernel's signature", timeout: float | None = None) -> Any:
    """`target(*args)` in the worker process, at most `timeout` seconds (default: DEVICEKIT_PARSE_TIMEOUT)."""
    global _worker
    limit = parse_timeout() if timeout is None else timeout
    if limit <= 0:
        return _call(target, args)
    with _lock:
        if _worker is None or _worker.pid != os.getpid() or _worker.proc.poll() is not None:
            _worker = _Worker()
        try:
            status, value = _worker.call(target, args, limit)
        except TimeoutError:
            _worker.kill()
            _worker = None
            raise CompileError(f"{what} took longer than {limit:g} s and was stopped (a macro or template that "
                               "expands without end?); raise the limit with DEVICEKIT_PARSE_TIMEOUT=<seconds>, "
                               "or 0 for none") from None
        except (EOFError, OSError, pickle.UnpicklingError) as e:
            code = _worker.proc.poll()
            _worker.kill()
            _worker = None
            raise CompileError(f"{what}: the reader process died (exit code {code}, {type(e).__name__}); the source "
                               "crashed libclang. Try DEVICEKIT_PARSE_TIMEOUT=0 to read it in process and see the "
                               "crash") from None
    if status == "err":
        raise value
    return value
