"""The one llvmlite/LLVM state of the process: initialization, the host target machine, the ORC JIT.

LLVM's global context is not thread-safe, so every use of it (parse, optimize, emit, link) holds `LOCK`; os.fork
takes `LOCK` first, so a child never starts with LLVM in the middle of a call.
Imported only when a CPU device or the "llvm" pair is built.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import os
import threading

import llvmlite
import llvmlite.binding as llvm

LOCK = threading.RLock()
_lib_ids = itertools.count()


def _ffi_lock():
    """llvmlite's own lock around every call into libllvmlite (taken also outside LOCK: object disposal on garbage
    collection). A private attribute: None when a future llvmlite moves it (then only LOCK is held across fork)."""
    return getattr(getattr(getattr(llvm.ffi, "lib", None), "_lock", None), "_lock", None)


def _before_fork() -> None:
    """Fork only between LLVM calls: a child forked while another thread was inside LLVM would inherit LOCK,
    llvmlite's FFI lock and LLVM's own mutexes held forever, and half-updated LLVM state (12 of 20 such children
    hung on main). Waits for the current compile or link to finish. Order: LOCK, then the FFI lock (a thread may
    hold the FFI lock without LOCK, never the other way round while waiting)."""
    LOCK.acquire()
    if (ffi := _ffi_lock()) is not None:
        ffi.acquire()


def _after_fork_in_parent() -> None:
    if (ffi := _ffi_lock()) is not None:
        ffi.release()
    LOCK.release()


def _after_fork_in_child() -> None:
    global LOCK
    if (ffi := _ffi_lock()) is not None:
        ffi._at_fork_reinit()  # held by the forking thread, the only one the child has
    LOCK = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)

EXIT_WAIT_S = 10.0  # the longest an exiting interpreter waits for a thread inside LLVM


def _hold_at_exit() -> None:
    """The interpreter exits between LLVM calls only: a daemon thread still inside LLVM when the process ran its C++
    static destructors crashed it (SIGSEGV or SIGBUS after the script's last line, ~1 run in 75 under load: the
    spin pool's build, started by a script's first split launch, was still emitting its code). Exit waits for the
    call in flight (up to EXIT_WAIT_S) and keeps LOCK, so no thread starts another."""
    LOCK.acquire(timeout=EXIT_WAIT_S)


atexit.register(_hold_at_exit)


@functools.cache
def init() -> None:
    """Initialize the native target once (llvmlite >= 0.44 initializes LLVM itself)."""
    with LOCK:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()


@functools.cache
def host() -> tuple[str, str, str]:
    """(triple, cpu name, feature string) of this machine, as LLVM sees it."""
    init()
    return llvm.get_process_triple(), llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()


def target_machine(cpu: str, features: str, opt: int):
    """A fresh TargetMachine for the host triple (the JIT takes ownership of the one it is given)."""
    init()
    target = llvm.Target.from_triple(host()[0])
    return target.create_target_machine(cpu=cpu, features=features, opt=opt, reloc="pic", codemodel="default")


@functools.cache
def jit():
    """The process's ORC LLJIT: each Program links its object code into a JITDylib of its own."""
    init()
    with LOCK:
        return llvm.create_lljit_compiler()


def link_object(obj: bytes, symbol: str):
    """Link object code into a fresh JIT library; returns (resource tracker, address of `symbol`).

    The tracker owns the code: keep it alive as long as the address is called. Undefined symbols (libm's exp2f,
    memset, ...) resolve against the running process.
    """
    lib, (addr,) = link_symbols(obj, (symbol,))
    return lib, addr


def link_symbols(obj: bytes, symbols: tuple[str, ...]):
    """`link_object` for several symbols of one object: (resource tracker, their addresses in order), one link."""
    with LOCK:
        builder = llvm.JITLibraryBuilder().add_object_img(obj).add_current_process()
        for symbol in symbols:
            builder = builder.export_symbol(symbol)
        lib = builder.link(jit(), f"devicekit_cpu_{next(_lib_ids)}")
        addrs = [lib[symbol] for symbol in symbols]
    if missing := [s for s, a in zip(symbols, addrs) if not a]:
        raise RuntimeError(f"symbol {missing[0]!r} not found in the compiled object")
    return lib, addrs


def emit_object(src: str, opt: int) -> bytes:
    """The object code of IR `src` for this host, code generation at `opt`, no pass pipeline (the replay's
    dk_replay). On the upgrade thread it is made by the compile worker: here it would hold LOCK (~20 ms) while the
    launching thread's quick builds wait for it; elsewhere, here."""
    from . import compile_worker, upgrade
    from .llvm_compiler import optimized_object
    _, cpu, features = host()
    if upgrade.on_upgrade_thread():
        obj = compile_worker.build(opt, cpu, features, src, passes=0)
        if obj is not None:
            return obj
    tm = target_machine(cpu, features, opt)
    with LOCK:
        return optimized_object(tm, 0, src)


def versions() -> str:
    v = llvm.llvm_version_info
    return f"llvmlite-{llvmlite.__version__} LLVM-{v[0]}.{v[1]}.{v[2]}"
