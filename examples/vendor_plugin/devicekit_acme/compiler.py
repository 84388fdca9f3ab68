"""AcmeCompiler: ACME C -> a shared object, with the host C compiler and ACME's own flags."""

from __future__ import annotations

from devicekit_cpu.cc_compiler import CCompiler

from .toolchain import find_cc

# IEEE semantics (no fast-math, no contraction: the reference rounds a*b+c twice), O3, and the ACME target macro
ACME_FLAGS = ("-shared", "-fPIC", "-O3", "-fno-math-errno", "-ffp-contract=off", "-fwrapv", "-std=gnu11",
              "-DACME_TARGET=1", "-Wno-unused-variable", "-Wno-unused-function")


class AcmeCompiler(CCompiler):
    """The CPU plugin's C compiler driver with ACME's name and flags. `identity()` (name, compiler version, flags,
    host) is part of the compile-cache key, so changing a flag never reuses stale bytes."""

    name = "acme-cc"

    def __init__(self, cc: str | None = None, flags: tuple[str, ...] = ACME_FLAGS):
        cc = cc or find_cc()
        if cc is None:
            raise RuntimeError("no host C compiler for ACME (set ACME_CC or CC, or install clang/gcc)")
        super().__init__(cc, flags)
