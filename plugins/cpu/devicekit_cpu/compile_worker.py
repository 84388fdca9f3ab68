"""The compile worker: a child process that makes the final (O3) objects of the upgrade thread (upgrade.py).

Why a process: llvmlite holds the GIL in parts of its pipeline, and the Python around a build holds it too, so an
O3 compile on a thread of the launching process made launches wait for the GIL (bench/upgrade_stall.py: 25-55 of
~100,000 launches over 5 ms wall while 20 final builds ran). The worker receives the IR text, runs
`llvm_compiler.optimized_object` (the very function a build in process runs: the same llvmlite, target machine
settings and pipeline, so the same bytes; the worker's llvmlite/LLVM versions are checked at its start) and returns
the object bytes; the upgrade thread only waits on a pipe (no GIL held) and then loads the object.

Lifecycle: one worker per process, started at the first final build the upgrade thread asks for, niced (NICE) so it
takes the CPU the launching thread leaves, in a process group of its own (a terminal's Ctrl-C goes to the
foreground group: the parent gets KeyboardInterrupt, the worker goes on) and killed and reaped at exit (`shutdown`,
atexit; in a multiprocessing child, which ends with os._exit, its finalizers): no orphan, no zombie. A parent that
dies without either (SIGKILL, os._exit) closes the request pipe: the worker reads
EOF and exits. A forked child does not share its parent's worker (it starts its own when its upgrade thread asks).
A worker that dies, answers garbage, or takes over BUILD_TIMEOUT s is killed and reaped, the reason is logged
(DEVICEKIT_DEBUG=1, and `reason()`), and `build` returns None: the caller compiles in process (the upgrade thread,
as before). After MAX_STARTS failed workers the process stops starting them.
"""

from __future__ import annotations

import atexit
import os
import select
import signal
import struct
import sys
import threading
import time

from devicekit import forksafe
from devicekit.debug import debug_level, dprint
from devicekit.errors import CompileError

# the worker's niceness above its parent's: the launching thread wins the CPU when both want it. Measured at load
# 9-13 on 2 CPUs (bench/upgrade_stall.py): 0 adopts 20 builds in ~3 s, 5 in ~5-10 s, 10 in ~8 s, 19 (and SCHED_IDLE)
# starves them (2-7 of 20 in 19 s); launches over 5 ms stayed at the machine's own rate in every case
NICE = 5
START_TIMEOUT = 60.0  # seconds for a new worker to import llvmlite and say it is ready
BUILD_TIMEOUT = 300.0  # seconds one final build may take before the worker counts as stuck
MAX_STARTS = 3  # workers this process starts at most (each failure logged); then builds stay in process

_LEN = struct.Struct("<Q")
_CODE = "from devicekit_cpu.compile_worker import worker_main; worker_main({nice})"

enabled = True  # False: every build in process (bench/upgrade_stall.py's `thread` mode)
served = 0  # objects the workers of this process made (tests: a final build went through one)


class WorkerGone(Exception):
    """The worker died, closed its pipe, answered garbage or timed out (the message says which)."""


def _pack(kind: bytes, parts: list[bytes]) -> bytes:
    body = b"".join(_LEN.pack(len(p)) + p for p in parts)
    return _LEN.pack(len(body) + 1) + kind + body


def _unpack(msg: bytes) -> tuple[bytes, list[bytes]]:
    kind, parts, i = msg[:1], [], 1
    while i < len(msg):
        if i + _LEN.size > len(msg):
            raise WorkerGone("a truncated answer")
        n = _LEN.unpack_from(msg, i)[0]
        i += _LEN.size
        if i + n > len(msg):
            raise WorkerGone("a truncated answer")
        parts.append(msg[i:i + n])
        i += n
    return kind, parts


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    """`n` bytes from `fd`; WorkerGone at EOF or past `deadline` (time.monotonic; None: no limit)."""
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise WorkerGone("no answer in time")
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise WorkerGone("its pipe closed (the worker exited)")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read_msg(fd: int, deadline: float | None) -> tuple[bytes, list[bytes]]:
    n = _LEN.unpack(_read_exact(fd, _LEN.size, deadline))[0]
    if not 1 <= n <= 1 << 34:
        raise WorkerGone(f"an answer of {n} bytes")
    return _unpack(_read_exact(fd, n, deadline))


def worker_main(nice: int = NICE) -> None:
    """The worker's loop: (opt, passes, cpu, features, src) in on fd 0 (`opt`: the target machine's level, `passes`:
    the pass pipeline's, 0 for none); b"O" + object bytes or b"E" + (message, log) out."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # its own group already: a stray SIGINT must not kill a build
    try:
        os.nice(nice)
    except OSError:
        pass
    out = os.dup(1)  # answers go to the original fd 1; anything LLVM prints goes to stderr instead
    os.dup2(2, 1)
    from . import llvm_jit
    from .llvm_compiler import optimized_object
    _write_all(out, _pack(b"R", [llvm_jit.versions().encode()]))
    machines: dict = {}
    while True:
        try:
            _, parts = _read_msg(0, None)
        except WorkerGone:
            return  # the parent closed the pipe (exit, or it died)
        opt, passes, cpu, features = int(parts[0]), int(parts[1]), parts[2].decode(), parts[3].decode()
        src = parts[4].decode()
        tm = machines.get((opt, cpu, features))
        if tm is None:
            tm = machines[(opt, cpu, features)] = llvm_jit.target_machine(cpu, features, opt)
        try:
            with llvm_jit.LOCK:
                answer = _pack(b"O", [optimized_object(tm, passes, src)])
        except CompileError as e:
            answer = _pack(b"E", [e.message.encode(), (e.log or "").encode()])
        except Exception as e:  # noqa: BLE001 - any other failure goes back as a build error
            answer = _pack(b"E", [f"{type(e).__name__}: {e}".encode(), b""])
        try:
            _write_all(out, answer)
        except BrokenPipeError:
            return


class _Worker:
    """One worker process and its two pipes, owned by the process that started it (`owner`)."""

    def __init__(self) -> None:
        from . import llvm_jit
        self.owner = os.getpid()
        self.stopping, self.status = threading.Lock(), None
        req_r, self.req = os.pipe()
        self.rep, rep_w = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.exists(p))  # imports as we do
        err = (os.POSIX_SPAWN_DUP2, 2, 2) if debug_level() >= 1 else \
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)
        try:
            self.pid = os.posix_spawn(sys.executable, [sys.executable, "-c", _CODE.format(nice=int(NICE))], env, setpgroup=0,
                                      file_actions=[(os.POSIX_SPAWN_DUP2, req_r, 0), (os.POSIX_SPAWN_DUP2, rep_w, 1),
                                                    err])
        except BaseException:
            os.close(self.req)
            os.close(self.rep)
            raise
        finally:
            os.close(req_r)
            os.close(rep_w)
        try:
            kind, parts = _read_msg(self.rep, time.monotonic() + START_TIMEOUT)
            if kind != b"R" or not parts or parts[0].decode() != llvm_jit.versions():
                got = parts[0].decode(errors="replace") if kind == b"R" and parts else "no greeting"
                raise WorkerGone(f"it runs {got}, this process {llvm_jit.versions()} (the bytes would differ)")
        except BaseException:
            self.stop()
            raise

    def call(self, opt: int, passes: int, cpu: str, features: str, src: str) -> tuple[bytes, list[bytes]]:
        try:
            _write_all(self.req, _pack(b"B", [str(opt).encode(), str(passes).encode(), cpu.encode(),
                                              features.encode(), src.encode()]))
        except BrokenPipeError:
            raise WorkerGone("its pipe closed (the worker exited)") from None
        return _read_msg(self.rep, time.monotonic() + BUILD_TIMEOUT)

    def stop(self) -> str:
        """Kill the worker, reap it (no zombie) and close the pipes, once (the upgrade thread and atexit may both
        ask); its exit status, in words."""
        with self.stopping:
            if self.status is not None:
                return self.status
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                code = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
                self.status = f"exit code {code}" if code >= 0 else f"signal {-code}"
            except ChildProcessError:
                self.status = "already reaped"
            for fd in (self.req, self.rep):
                os.close(fd)
            return self.status


_LOCK = forksafe.lock()
_WORKER: list[_Worker] = []  # this process's worker, once started
_FAILS: list[str] = []  # why each worker of this process failed (the newest last)
_EXITING: list[bool] = []


def reason() -> str | None:
    """Why the last worker of this process failed (None: none did)."""
    return _FAILS[-1] if _FAILS else None


def worker_pid() -> int | None:
    """The pid of this process's running worker (None: none started or it failed)."""
    return _WORKER[0].pid if _WORKER and _WORKER[0].owner == os.getpid() else None


def _fail(w: _Worker | None, why: str) -> None:
    _WORKER.clear()  # first: a child forked meanwhile must not close the pipes' numbers once stop() freed them
    status = w.stop() if w is not None else ""
    msg = f"compile worker {'' if w is None else w.pid} failed: {why}{f' ({status})' if status else ''}; " + \
        ("final builds go on in this process" if len(_FAILS) + 1 < MAX_STARTS else
         "no more workers in this process: final builds run on the upgrade thread")
    _FAILS.append(msg)
    dprint(1, f"devicekit-cpu: {msg}")


def _can_spawn() -> bool:
    """A POSIX host whose sys.executable is a Python that runs `-c` (a frozen app's would start the app again)."""
    return hasattr(os, "posix_spawn") and not getattr(sys, "frozen", False) and bool(sys.executable)


def build(opt: int, cpu: str, features: str, src: str, passes: int | None = None) -> bytes | None:
    """The O`opt` object of `src` made by the worker (starting it if needed), after the O`passes` pass pipeline
    (default: `opt`; 0: none, the replay's dk_replay); None when there is no worker (off,
    not POSIX, failed: `reason()` says why), then the caller builds in process. CompileError: LLVM refused the IR."""
    if not enabled or not _can_spawn() or len(_FAILS) >= MAX_STARTS:
        return None
    if _EXITING:
        raise CompileError("the process is exiting: final build not made")
    with _LOCK:
        w = _WORKER[0] if _WORKER and _WORKER[0].owner == os.getpid() else None
        if w is None:
            try:
                w = _Worker()
            except (OSError, WorkerGone) as e:
                _fail(None, f"it did not start: {e}")
                return None
            _WORKER[:] = [w]
            if (mp := sys.modules.get("multiprocessing.util")) is not None:
                mp.Finalize(None, shutdown, exitpriority=0)  # a multiprocessing child exits by os._exit: no atexit
        try:
            kind, parts = w.call(opt, opt if passes is None else passes, cpu, features, src)
        except (OSError, WorkerGone) as e:
            if _EXITING:
                raise CompileError("the process is exiting: final build not made") from None
            _fail(w, str(e))
            return None
    if kind == b"O" and len(parts) == 1:
        global served
        served += 1
        return parts[0]
    if kind == b"E" and len(parts) == 2:
        raise CompileError(parts[0].decode(errors="replace"), parts[1].decode(errors="replace"), src)
    with _LOCK:
        if _WORKER and _WORKER[0] is w:
            _fail(w, f"an answer of kind {kind!r} with {len(parts)} parts")
    return None


def shutdown() -> None:
    """Kill and reap this process's worker (atexit): no orphan, no zombie. A build in flight is abandoned."""
    _EXITING.append(True)
    if _WORKER and _WORKER[0].owner == os.getpid():
        w = _WORKER.pop()
        w.stop()


def _after_fork_in_child() -> None:
    """A child does not use its parent's worker: its copies of the pipes are closed (the parent's stay open)."""
    if _WORKER:
        w = _WORKER.pop()
        if w.status is not None:  # stopped: its pipes are closed, their numbers may be another file's now
            return
        for fd in (w.req, w.rep):
            try:
                os.close(fd)
            except OSError:
                pass


atexit.register(shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
