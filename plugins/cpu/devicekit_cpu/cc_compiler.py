"""CCompiler: C -> a shared object, with `clang` when it is on PATH, else `cc` (CC overrides both)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from devicekit.compile import Compiler
from devicekit.errors import CompileError
from devicekit.forksafe import private_tmpdir

from .hostinfo import cpu_fingerprint

# IEEE semantics: no -ffast-math, no fp contraction (MULACC is two roundings); errno never set by libm calls;
# -fwrapv: signed int arithmetic wraps (two's complement) as in the IR, instead of being UB the optimizer exploits
FLAGS = ("-shared", "-fPIC", "-O2", "-march=native", "-fno-math-errno", "-ffp-contract=off", "-fwrapv", "-std=gnu11",
         "-fno-plt", "-Wno-unused-variable", "-Wno-unused-function")


def find_cc() -> str | None:
    """$CC, else clang, else cc, else gcc: the first found on PATH (a path is returned), or None."""
    for cand in (os.environ.get("CC"), "clang", "cc", "gcc"):
        if cand and (path := shutil.which(cand)):
            return path
    return None


@functools.cache
def cc_version(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return f"unknown ({e})"
    return out.splitlines()[0].strip() if out else "unknown"


@functools.cache
def builtin_include_args(cc: str | None) -> tuple[str, ...]:
    """Where `cc` keeps its builtin headers (stddef.h, stdbool.h, float.h, stdarg.h), as libclang args: clang's
    resource dir, or gcc's include dir. The `libclang` wheel ships none, so the signature reader borrows them from
    the compiler the pair uses; () when none is found (then only headers that need none parse)."""
    if cc is None:
        return ()
    is_clang = "clang" in os.path.basename(cc) or "clang" in cc_version(cc).lower()
    query = ["-print-resource-dir"] if is_clang else ["-print-file-name=include"]
    try:
        out = subprocess.run([cc, *query], capture_output=True, text=True, timeout=30, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ()
    if is_clang and os.path.isfile(os.path.join(out, "include", "stddef.h")):
        return ("-resource-dir", out)
    if os.path.isfile(os.path.join(out, "stddef.h")):
        return ("-isystem", out)
    return ()


def reader_args(cc: str | None = None, flags: tuple[str, ...] = FLAGS) -> list[str]:
    """libclang args that read a C source as `cc` with `flags` compiles it: the language standard, -D/-I/-U flags
    and the compiler's builtin headers."""
    keep = [f for f in flags if f.startswith(("-std=", "-D", "-I", "-U"))]
    return ["-x", "c", *keep, *builtin_include_args(cc or find_cc())]


class CCompiler(Compiler):
    """Runs the system C compiler in a private temp dir (removed afterwards); the bytes are the .so itself."""

    name = "cc"

    def __init__(self, cc: str | None = None, flags: tuple[str, ...] = FLAGS):
        self.cc = cc or find_cc()
        if self.cc is None:
            raise RuntimeError("no C compiler: none of $CC, clang, cc, gcc is on PATH")
        if cc is None and not os.environ.get("CC") and os.path.basename(self.cc) != "clang":
            from devicekit.debug import dprint
            dprint(1, f"CPU pair 'c': clang is not on PATH, using {self.cc} ({cc_version(self.cc)})")
        self.flags = tuple(flags)
        self._id = f"{self.name} {os.path.basename(self.cc)}: {cc_version(self.cc)} [{' '.join(self.flags)}] " \
                   f"host={cpu_fingerprint()}"

    def identity(self) -> str:
        return self._id

    def compile_src(self, src: str) -> bytes:
        with private_tmpdir(prefix="devicekit_cc_") as d:
            out = os.path.join(d, "kernel.so")
            try:
                p = subprocess.run([self.cc, *self.flags, "-x", "c", "-", "-o", out, "-lm"], input=src,
                                   capture_output=True, text=True, timeout=300, check=False)
            except (OSError, subprocess.SubprocessError) as e:
                raise CompileError(f"could not run {self.cc}: {e}", "", src) from None
            if p.returncode != 0:
                raise CompileError(f"{os.path.basename(self.cc)} rejected the C source (exit {p.returncode})",
                                   p.stderr, src)
            with open(out, "rb") as f:
                return f.read()

    def __reduce__(self):
        return (type(self), (self.cc, self.flags))
