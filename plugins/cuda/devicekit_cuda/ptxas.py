"""ptxas as a subprocess: PTX -> cubin, the fallback when nvJitLink is missing or unusable.

A ptxas older than the NVRTC that wrote the PTX rejects its `.version` directive ("Unsupported .version 9.5;
current version is '9.0'"). The kernels devicekit renders use no PTX feature newer than the oldest ISA the
architecture needs, so the directive is lowered to what ptxas supports and the assembly retried once; that
retry is reported in `notes` (and so in DEVICEKIT_DEBUG output), never done silently.
"""

from __future__ import annotations

import os
import re

from . import toolchain


class PtxasError(RuntimeError):
    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


_UNSUPPORTED = re.compile(r"Unsupported \.version (\d+\.\d+); current version is '(\d+\.\d+)'")


def path() -> str:
    found, searched = toolchain.ptxas()
    if found is None:
        raise PtxasError("ptxas not found (install the CUDA toolkit, or set DEVICEKIT_PTXAS); searched: "
                         + ", ".join(searched))
    return found.path


def version(exe: str | None = None) -> str:
    """'13.0' from `ptxas --version`, or '' when it cannot be run."""
    try:
        from devicekit.compile.subproc import CompilerFailed, run_compiler
        out = run_compiler([exe or path(), "--version"], timeout=30).stdout
    except (PtxasError, CompilerFailed):
        return ""
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else ""


def assemble(ptx: bytes, arch: str, options: list[str] | None = None, notes: list[str] | None = None) -> bytes:
    from devicekit.compile.subproc import CompilerFailed, compiler_tmpdir, failure_message, run_compiler
    exe = path()
    with compiler_tmpdir(prefix="devicekit_ptxas_") as d:
        src, dst = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        for attempt in range(2):
            with open(src, "wb") as f:
                f.write(ptx.rstrip(b"\0"))
            try:
                r = run_compiler([exe, f"-arch={arch}", *(options or []), src, "-o", dst], what="ptxas")
            except CompilerFailed as e:
                raise PtxasError(e.message) from None
            if r.returncode == 0:
                with open(dst, "rb") as f:
                    return f.read()
            log = (r.stderr + r.stdout).strip()
            m = _UNSUPPORTED.search(log)
            if attempt == 0 and m:
                new, old = m.group(2), m.group(1)
                ptx = re.sub(rb"^\.version\s+\S+", f".version {new}".encode(), ptx, count=1, flags=re.MULTILINE)
                if notes is not None:
                    notes.append(f"ptxas {version(exe) or '?'} supports PTX ISA {new}; lowered .version {old} -> {new}")
                continue
            raise PtxasError(failure_message(r, "ptxas") or f"ptxas -arch={arch} failed (exit {r.returncode})", log)
    raise AssertionError("unreachable")
