"""Native replay of launch plans: one ctypes call runs a whole run of CPU launches.

A plan's launches that run on one thread (no split, or a split below the threading threshold) with int64 and
pointer arguments only are packed into one int64 array of records, `[fn, argc, arg0, ..., arg(argc-1)]` each, and
`dk_replay(records, n)` (LLVM IR made here, linked into the process's JIT once) calls them in order. No Python runs
between those launches: a replayed launch costs a native call (bench: tens of nanoseconds), not an `execute`.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading

from devicekit import forksafe

from . import llvm_jit

MAX_ARGS = 32  # a record with more arguments is replayed through Program._launch


def replay_ir() -> str:
    """The IR of dk_replay and dk_replay1 (spinpool.py links it with its own functions)."""
    cases = " ".join(f"i64 {c}, label %c{c}" for c in range(MAX_ARGS + 1))
    blocks = []
    for c in range(MAX_ARGS + 1):
        loads = "".join(f"  %a{c}_{j}p = getelementptr i64, ptr %args, i64 {j}\n  %a{c}_{j} = load i64, ptr %a{c}_{j}p\n"
                        for j in range(c))
        args = ", ".join(f"i64 %a{c}_{j}" for j in range(c))
        blocks.append(f"c{c}:\n{loads}  call void %fn({args})\n  br label %tail\n")
    return f"""
define void @dk_replay(ptr %rec, i64 %n) {{
entry:
  br label %head
head:
  %i = phi i64 [0, %entry], [%i1, %tail]
  %p = phi ptr [%rec, %entry], [%p1, %tail]
  %more = icmp ult i64 %i, %n
  br i1 %more, label %body, label %done
body:
  %fn = load ptr, ptr %p
  %pc = getelementptr i64, ptr %p, i64 1
  %argc = load i64, ptr %pc
  %args = getelementptr i64, ptr %p, i64 2
  switch i64 %argc, label %tail [ {cases} ]
{''.join(blocks)}tail:
  %i1 = add i64 %i, 1
  %skip = add i64 %argc, 2
  %p1 = getelementptr i64, ptr %p, i64 %skip
  br label %head
done:
  ret void
}}

define void @dk_replay1(ptr %rec) {{
entry:
  call void @dk_replay(ptr %rec, i64 1)
  ret void
}}
"""


_FN: list = []  # the process's dk_replay, once built
_LOCK = forksafe.lock()  # one build at a time; a child forked during a build starts with it released


def replayer():
    """The process's `dk_replay(records, n)` as a ctypes function (compiled and linked on first use, ~20 ms)."""
    if not _FN:
        with _LOCK:
            if not _FN:
                _FN.append(_build())
    return _FN[0]


def ready() -> bool:
    """Whether `replayer()` answers at once."""
    return bool(_FN)


def warm() -> None:
    """Build the replayer on a thread of its own, once: the caller goes on (its launch does not wait ~20 ms)."""
    global _WARMING
    if _FN or _WARMING == os.getpid():
        return
    _WARMING = os.getpid()
    threading.Thread(target=replayer, name="devicekit-cpu-replay-build", daemon=True).start()


_WARMING = 0  # the process whose warm() started a build (a forked child starts its own)


def _build():
    obj = llvm_jit.emit_object(replay_ir(), 2)  # by the compile worker when on the upgrade thread
    lib, (addr, addr1) = llvm_jit.link_symbols(obj, ("dk_replay", "dk_replay1"))
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(addr)
    fn._dk_lib = lib  # the JIT library lives as long as the function
    # one record, one argument, no argtypes: a bound repeat's call (the core's launch cache), ~125 ns where the
    # typed two-argument call of Python ints costs ~270
    one = ctypes.CFUNCTYPE(None)(addr1)
    one._dk_lib = lib
    fn._dk_one = one
    return fn


def run_records(records, n: int) -> None:
    """Call the `n` packed records of the int64 numpy array `records`, in order."""
    replayer()(records.ctypes.data, n)


def _bind(records, n: int):
    """`run_records(records, n)` as a call of no arguments with the address taken once (the core's launch cache:
    a repeated launch is this one ctypes call of one pointer: dk_replay1), holding `records` alive. None while the
    replayer is not built yet: its build starts on another thread (`warm`) and the cache asks again later, so the
    first repeated launch of a process does not wait ~20 ms for it."""
    if not _FN:
        warm()
        return None
    if n == 1:
        call = functools.partial(_FN[0]._dk_one, ctypes.c_void_p(records.ctypes.data))
    else:
        call = functools.partial(_FN[0], records.ctypes.data, n)
    call.records = records  # the call holds its records: dk_replay reads them at every call (the core's launch cache
    return call             # passes a temporary array; freed, its memory was reused and dk_replay called garbage)


run_records.bind = _bind
