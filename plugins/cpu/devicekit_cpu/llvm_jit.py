"""The one llvmlite/LLVM state of the process: initialization, the host target machine, the ORC JIT.

LLVM's global context is not thread-safe, so every use of it (parse, optimize, emit, link) holds `LOCK`.
Imported only when a CPU device or the "llvm" pair is built.
"""

from __future__ import annotations

import functools
import itertools
import threading

import llvmlite
import llvmlite.binding as llvm

LOCK = threading.RLock()
_lib_ids = itertools.count()


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
    with LOCK:
        lib = (llvm.JITLibraryBuilder().add_object_img(obj).add_current_process().export_symbol(symbol)
               .link(jit(), f"devicekit_cpu_{next(_lib_ids)}"))
        addr = lib[symbol]
    if not addr:
        raise RuntimeError(f"symbol {symbol!r} not found in the compiled object")
    return lib, addr


def versions() -> str:
    v = llvm.llvm_version_info
    return f"llvmlite-{llvmlite.__version__} LLVM-{v[0]}.{v[1]}.{v[2]}"
