"""Load compiled bytes in process: object code into llvmlite's JIT, shared objects through dlopen.

Both first pass `elfcheck.check` (on ELF hosts) unless the bytes are trusted (`CompiledSpec.trusted`): damaged
bytes raise MalformedObjectError instead of aborting LLVM's object reader or crashing the dynamic loader. Neither
leaves a file behind: a .so is written to a uniquely named file in a private dir under devicekit's temp root
(`compile.subproc.compiler_tmpdir`, as the compilers' own: a dir a crashed process left there is removed by the next
one), dlopened and removed at once (the mapping keeps the code alive). A unique path matters: the dynamic loader reuses
an already loaded library whose path string matches, so /proc/self/fd/N paths (reused fd numbers) are not safe.

A shared object is dlclosed when its last keepalive goes (`SharedObject`): ctypes never closes what it opens, and
each library holds ~5 memory mappings, so a process that built ~13,000 distinct c-pair kernels reached the kernel's
vm.max_map_count (65,530) and dlopen failed, or the next mmap of Python crashed.
"""

from __future__ import annotations

import ctypes
import os
import sys
import weakref

from devicekit.compile.subproc import compiler_tmpdir
from devicekit.errors import CompileError


class LoadError(CompileError, RuntimeError):
    """Compiled bytes the dynamic loader refused (an undefined symbol, no memory mappings left) or without the
    kernel's symbol: a devicekit error naming the program and why (a RuntimeError too, as it was)."""


def is_shared_object(lib: bytes) -> bool:
    """A shared library (ELF ET_DYN, Mach-O MH_DYLIB), as opposed to an object file (ELF ET_REL, Mach-O MH_OBJECT)
    from llvmlite."""
    if lib[:4] == b"\x7fELF":
        return int.from_bytes(lib[16:18], "little") == 3
    if lib[:4] in (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe"):  # Mach-O, little-endian
        return int.from_bytes(lib[12:16], "little") == 6
    return False


def load_object(lib: bytes, symbol: str) -> tuple[object, int]:
    """(keepalive, address) of `symbol` in relocatable object code, linked by the ORC JIT."""
    from . import llvm_jit
    return llvm_jit.link_object(lib, symbol)


def _dlclose():
    """The platform's dlclose (POSIX), None where there is none (Windows: the plugin loads no .dll)."""
    import _ctypes
    return getattr(_ctypes, "dlclose", None)


class SharedObject:
    """Keeps a dlopened library mapped while referenced; dlclosed when collected. Its functions must not be called
    after that: every holder of an address (a CPUProgram, a plan's steps through their Programs) holds this too."""

    __slots__ = ("__weakref__", "dll")

    def __init__(self, dll: ctypes.CDLL):
        self.dll = dll
        close = _dlclose()
        if close is not None:
            weakref.finalize(self, close, dll._handle).atexit = False  # at exit the process unmaps everything anyway


def _map_count() -> int | None:
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


def load_shared(lib: bytes, symbol: str) -> tuple[object, int]:
    """(keepalive, address) of `symbol` in a shared object."""
    with compiler_tmpdir(prefix="devicekit_so_") as d:  # under devicekit's temp root: a crashed process's is swept
        path = os.path.join(d, f"k{os.getpid()}_{id(lib):x}{'.dylib' if sys.platform == 'darwin' else '.so'}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
        try:
            os.write(fd, lib)
        finally:
            os.close(fd)
        try:
            dll = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
        except OSError as e:
            maps = _map_count()
            hint = (f"; this process holds {maps} memory mappings (Linux's vm.max_map_count limits them): drop "
                    "Programs that are no longer used") if maps is not None and maps > 60000 else ""
            why = str(e).replace(f"{path}: ", "")  # the file is gone: its temp path says nothing
            raise LoadError(f"program {symbol!r}: dlopen of the compiled kernel failed: {why}{hint}") from None
        finally:
            os.unlink(path)
    try:
        fn = getattr(dll, symbol)
    except AttributeError:
        raise LoadError(f"symbol {symbol!r} not found in the shared object") from None
    return SharedObject(dll), ctypes.cast(fn, ctypes.c_void_p).value


def load(lib: bytes, symbol: str, trusted: bool = False, program: str | None = None) -> tuple[object, int]:
    """(keepalive, address) of program `symbol` in `lib`, checked first unless `trusted` (bytes this process's
    compiler produced, or a cache entry whose MAC verified): MalformedObjectError (a CompileError and a RuntimeError)
    names the program (`program`, the kernel's name, else the symbol) and the problem when the bytes would crash the
    JIT linker or dlopen."""
    shared = is_shared_object(lib)
    if not trusted and (lib[:4] == b"\x7fELF" or sys.platform != "darwin"):  # Mach-O (macOS): passed through
        from .elfcheck import check
        check(lib, program or symbol, shared)
    return load_shared(lib, symbol) if shared else load_object(lib, symbol)
