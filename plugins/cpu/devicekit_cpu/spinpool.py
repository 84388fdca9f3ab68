"""The CPU pool's native handoff: worker threads that wait for a launch's chunks spinning in native code.

Why: the Python pool (threadpool.py) hands a chunk to a worker through a queue; the worker wakes in the kernel's
scheduler (on a 2-core KVM guest ~20-80 us after the put), takes the GIL, then calls the kernel. A split launch of a
784x512 float32 SGD update (96 us on one thread) took 160-210 us on two; torch's OpenMP pool, whose workers spin
between launches, takes 21 us (issue 31). Here each worker runs `dk_pool_work` (LLVM IR linked into the process's
JIT like dk_replay), which watches its slot for a new record and calls it with dk_replay, for up to
DEVICEKIT_CPU_SPIN_US after its last chunk, then returns to Python and sleeps on a semaphore. No Python and no GIL
run between a post and the worker's call while it spins.

A slot is 16 int64 words (two cache lines): [0] the launch's sequence number, [1] its record's address (written by
the launching thread); [8] the last sequence done, [9] "sleeping", [10] the last sequence claimed (by the worker or
the launcher). A chunk is claimed by `dk_pool_claim`: a compare-exchange of [10] from a value below the
launch's sequence to it; whoever makes it runs the chunk, so the launcher runs the chunks of workers that have not
started (asleep, or descheduled) instead of waiting. A worker that read a sequence and was descheduled before
claiming finds [10] at or past it and runs nothing (an exchange, the first form, let such a stale claim win the
*next* launch's chunk, which then ran twice: the three-thread soak found it after ~200,000 launches).
Sleeping is a Dekker pair: the worker stores [9] = 1 then reads [0]; the launcher stores [0] then reads [9]
(both sequentially consistent): one of them sees the other, and whoever turns [9] from 1 to 0 decides whether the
semaphore is released (the launcher) or not (the worker, back on its own).

A wait that has spun POLITE_US calls sched_yield between polls: on a loaded machine the thread it waits for (a
worker preempted mid-chunk, the launcher's next kernel) may need this very core.

A worker may still be spinning when the interpreter exits: llvmlite disposes of no JIT code during shutdown, so
the code it runs stays mapped until the process ends.

Records are dk_replay's (`[fn, argc, args...]`, int64 and pointer arguments only); launches of other arguments,
and a launch while another thread's launch holds the pool, go through threadpool.py as before.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
import warnings

from devicekit import forksafe

from . import llvm_jit, settings
from .replay import replay_ir

POLITE_US = 50  # after this long spinning a wait yields between polls (the module's docstring)
WORDS = 16  # int64 words a slot: two cache lines (the launcher's and the worker's)
SEQ, REC, DONE, SLEEPING, CLAIMED = 0, 1, 8, 9, 10


def _pause(triple: str) -> str:
    if triple.startswith(("x86_64", "i686", "i386")):
        return "  call void @llvm.x86.sse2.pause()\n"
    if triple.startswith(("aarch64", "arm64")):
        return '  call void asm sideeffect "yield", ""()\n'
    return ""


def _ir(triple: str) -> str:
    pause = _pause(triple)
    decl = "declare void @llvm.x86.sse2.pause()\n" if "sse2" in pause else ""
    posix = "windows" not in triple and "win32" not in triple
    yield_ = "  call i32 @sched_yield()\n" if posix else pause
    decl += "declare i32 @sched_yield()\n" if posix else ""
    return replay_ir() + decl + f"""
declare i64 @llvm.readcyclecounter()

define i64 @dk_pool_claim(ptr %slot, i64 %seq) {{
entry:
  %claimp = getelementptr i64, ptr %slot, i64 {CLAIMED}
  br label %head
head:
  %c = load atomic i64, ptr %claimp acquire, align 8
  %taken = icmp sge i64 %c, %seq
  br i1 %taken, label %lost, label %try
try:
  %cx = cmpxchg ptr %claimp, i64 %c, i64 %seq acq_rel acquire
  %ok = extractvalue {{i64, i1}} %cx, 1
  br i1 %ok, label %won, label %head
won:
  ret i64 1
lost:
  ret i64 0
}}

define i64 @dk_cycles() {{
  %c = call i64 @llvm.readcyclecounter()
  ret i64 %c
}}

define i64 @dk_pool_work(ptr %slot, i64 %last0, i64 %budget, i64 %polite) {{
entry:
  %seqp = getelementptr i64, ptr %slot, i64 {SEQ}
  %recp = getelementptr i64, ptr %slot, i64 {REC}
  %donep = getelementptr i64, ptr %slot, i64 {DONE}
  %sleepp = getelementptr i64, ptr %slot, i64 {SLEEPING}
  %t00 = call i64 @llvm.readcyclecounter()
  br label %loop
loop:
  %last = phi i64 [%last0, %entry], [%seq, %ran], [%last, %idle], [%last, %yieldw], [%last, %awake]
  %t0 = phi i64 [%t00, %entry], [%tr, %ran], [%t0, %idle], [%t0, %yieldw], [%t0, %awake]
  %seq = load atomic i64, ptr %seqp acquire, align 8
  %new = icmp ne i64 %seq, %last
  br i1 %new, label %job, label %wait
job:
  %got = call i64 @dk_pool_claim(ptr %slot, i64 %seq)
  %won = icmp ne i64 %got, 0
  br i1 %won, label %run, label %ran
run:
  %rec = load ptr, ptr %recp, align 8
  call void @dk_replay(ptr %rec, i64 1)
  store atomic i64 %seq, ptr %donep release, align 8
  br label %ran
ran:
  %tr = call i64 @llvm.readcyclecounter()
  br label %loop
wait:
  %now = call i64 @llvm.readcyclecounter()
  %el = sub i64 %now, %t0
  %over = icmp ugt i64 %el, %budget
  br i1 %over, label %sleep, label %idle
idle:
{pause}  %patient = icmp ugt i64 %el, %polite
  br i1 %patient, label %yieldw, label %loop
yieldw:
{yield_}  br label %loop
sleep:
  store atomic i64 1, ptr %sleepp seq_cst, align 8
  %seq2 = load atomic i64, ptr %seqp seq_cst, align 8
  %late = icmp ne i64 %seq2, %last
  br i1 %late, label %unsleep, label %out
unsleep:
  %cx = cmpxchg ptr %sleepp, i64 1, i64 0 seq_cst seq_cst
  %ok = extractvalue {{i64, i1}} %cx, 1
  br i1 %ok, label %awake, label %out
awake:
  br label %loop
out:
  ret i64 %last
}}

define i64 @dk_pool_post(ptr %slot, i64 %seq, ptr %rec) {{
entry:
  %recp = getelementptr i64, ptr %slot, i64 {REC}
  %seqp = getelementptr i64, ptr %slot, i64 {SEQ}
  %sleepp = getelementptr i64, ptr %slot, i64 {SLEEPING}
  store ptr %rec, ptr %recp, align 8
  store atomic i64 %seq, ptr %seqp seq_cst, align 8
  %s = load atomic i64, ptr %sleepp seq_cst, align 8
  %asleep = icmp eq i64 %s, 1
  br i1 %asleep, label %wake, label %no
wake:
  %cx = cmpxchg ptr %sleepp, i64 1, i64 0 seq_cst seq_cst
  %ok = extractvalue {{i64, i1}} %cx, 1
  %r = zext i1 %ok to i64
  ret i64 %r
no:
  ret i64 0
}}

define void @dk_pool_join(ptr %slots, i64 %n, i64 %seq, ptr %rec0, i64 %polite) {{
entry:
  call void @dk_replay(ptr %rec0, i64 1)
  %tj = call i64 @llvm.readcyclecounter()
  br label %head
head:
  %i = phi i64 [0, %entry], [%i1, %next]
  %more = icmp ult i64 %i, %n
  br i1 %more, label %body, label %done
body:
  %off = mul i64 %i, {WORDS}
  %slot = getelementptr i64, ptr %slots, i64 %off
  %gotj = call i64 @dk_pool_claim(ptr %slot, i64 %seq)
  %mine = icmp ne i64 %gotj, 0
  br i1 %mine, label %run, label %spin
run:
  %recp = getelementptr i64, ptr %slot, i64 {REC}
  %rec = load ptr, ptr %recp, align 8
  call void @dk_replay(ptr %rec, i64 1)
  br label %next
spin:
  %donep = getelementptr i64, ptr %slot, i64 {DONE}
  %d = load atomic i64, ptr %donep acquire, align 8
  %fin = icmp eq i64 %d, %seq
  br i1 %fin, label %next, label %pause
pause:
{pause}  %nowj = call i64 @llvm.readcyclecounter()
  %elj = sub i64 %nowj, %tj
  %long = icmp ugt i64 %elj, %polite
  br i1 %long, label %yieldj, label %spin
yieldj:
{yield_}  br label %spin
next:
  %i1 = add i64 %i, 1
  br label %head
done:
  ret void
}}
"""


class SpinPool:
    """`run(records, n, width)`: call n dk_replay records (each `width` int64 words, one chunk of a split launch
    each) on the calling thread and n - 1 spinning workers; False when another thread's launch holds the pool (the
    caller then uses threadpool.py)."""

    def __init__(self, fns: dict, cycles_per_us: float):
        self._fns = fns
        self._cycles_per_us = cycles_per_us
        self._raw = (ctypes.c_int64 * (WORDS * 64 + 8))()  # up to 64 workers, 64-byte aligned below
        self._slots = -(-ctypes.addressof(self._raw) // 64) * 64
        self._seq = 0
        self._lock = threading.Lock()
        self._workers: list[threading.Semaphore] = []

    def _budget(self) -> int:
        return int(settings.get("DEVICEKIT_CPU_SPIN_US") * self._cycles_per_us)

    def _polite(self) -> int:
        return int(POLITE_US * self._cycles_per_us)

    def _start(self, count: int) -> None:
        while len(self._workers) < min(count, 64):
            sem = threading.Semaphore(0)
            slot = self._slots + len(self._workers) * WORDS * 8
            threading.Thread(target=self._worker, args=(slot, sem), daemon=True,
                             name=f"devicekit-cpu-spin-{len(self._workers)}").start()
            self._workers.append(sem)

    def _worker(self, slot: int, sem: threading.Semaphore) -> None:
        work, last = self._fns["dk_pool_work"], 0
        while True:
            last = work(slot, last, self._budget(), self._polite())  # no GIL while it spins and runs chunks
            sem.acquire()

    def run(self, records, n: int, width: int) -> bool:
        if n - 1 > 64 or not self._lock.acquire(False):
            return False
        try:
            if len(self._workers) < n - 1:
                self._start(n - 1)
            self._seq += 1
            seq, base, post = self._seq, ctypes.addressof(records), self._fns["dk_pool_post"]
            for i in range(1, n):
                if post(self._slots + (i - 1) * WORDS * 8, seq, base + i * width * 8):
                    self._workers[i - 1].release()
            self._fns["dk_pool_join"](self._slots, n - 1, seq, base, self._polite())
        finally:
            self._lock.release()
        return True


_POOL: list = []  # the process's SpinPool once built
_LOCK = forksafe.lock()
_WARMING = 0


def _build() -> SpinPool:
    triple = llvm_jit.host()[0]
    obj = llvm_jit.emit_object(_ir(triple), 2)
    c64 = ctypes.c_int64
    sigs = {"dk_cycles": (c64,), "dk_pool_claim": (c64, c64, c64), "dk_pool_work": (c64, c64, c64, c64, c64), "dk_pool_post": (c64, c64, c64, c64),
            "dk_pool_join": (None, c64, c64, c64, c64, c64)}
    lib, addrs = llvm_jit.link_symbols(obj, tuple(sigs))
    fns: dict = {name: ctypes.CFUNCTYPE(*sig)(addr) for (name, sig), addr in zip(sigs.items(), addrs)}
    fns["_lib"] = lib  # the JIT code lives as long as the pool
    cycles = fns["dk_cycles"]
    t0, c0 = time.perf_counter(), cycles()
    time.sleep(0.002)
    t1, c1 = time.perf_counter(), cycles()
    return SpinPool(fns, max(1.0, (c1 - c0) / ((t1 - t0) * 1e6)))


def get() -> SpinPool | None:
    """The process's spin pool, or None while it is being built (on a thread of its own: the first split launch
    of a process does not wait ~30 ms for it; until then threadpool.py runs the chunks) or where it cannot be."""
    global _WARMING
    if _POOL:
        return _POOL[0]
    if _WARMING != os.getpid():
        _WARMING = os.getpid()
        threading.Thread(target=_build_quietly, name="devicekit-cpu-spinpool-build", daemon=True).start()
    return None


def _build_quietly() -> None:
    try:
        _build_once()
    except Exception as e:  # noqa: BLE001 - split launches keep the Python pool
        warnings.warn(f"devicekit-cpu: the native spin pool could not be built ({type(e).__name__}: {e}); split "
                      f"launches use the Python thread pool", RuntimeWarning, stacklevel=1)


def ready() -> SpinPool:
    """The spin pool, built here if needed (tests, benchmarks)."""
    return _POOL[0] if _POOL else _build_once()


def _build_once() -> SpinPool:
    with _LOCK:
        if not _POOL:
            _POOL.append(_build())
        return _POOL[0]


def _reset_after_fork() -> None:
    """A forked child has none of the parent's workers: it builds its own pool on its first split launch."""
    global _WARMING
    _POOL.clear()
    _WARMING = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
