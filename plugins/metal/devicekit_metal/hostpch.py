"""A precompiled header of the shim (`shim/metal_stdlib`) for the host emulation's g++ builds.

Parsing the shim's headers is most of each HostKernel build (~0.3 s of a kernel's ~0.35 s; with the header
precompiled, ~0.09 s), and the tests and the fake Mac build hundreds of kernels. g++ looks for `metal_stdlib.gch` in
each include directory before the header itself, so the builds only gain one `-I` ahead of the shim's; g++ checks the
precompiled header against the build's flags and macros and reads the real header wherever it does not fit, so the
emulation's results never depend on it. One header per flag set, built on first use into a private temporary
directory of this process (never a shared or user cache directory: it is code compiled into every kernel), removed
at exit. Only g++: clang++ uses another mechanism, and any build failure leaves the builds as they were.
The libclang syntax check (hostcheck.syntax_check) gets the same from libclang itself (`libclang_pch`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from pathlib import Path

from devicekit.compile.subproc import run_compiler

ENABLED = True  # False: every build reads the shim's headers (a test compares both ways)
_lock = threading.Lock()
_dirs: dict[tuple[str, ...], str | None] = {}  # (compiler, *flags) -> directory holding metal_stdlib.gch, or None
_root: str | None = None


def _is_gcc(compiler: str) -> bool:
    path = shutil.which(compiler)
    return path is not None and "g++" in os.path.basename(os.path.realpath(path))


def pch_include(compiler: str, flags: list[str], shim_dir: Path, defines: tuple[str, ...] = ()) -> list[str]:
    """["-I<dir>"] for a build of `compiler` with `flags` (the build's own, less -shared, -o and the source) whose
    source defines `defines` (NAME=VALUE) before it includes the shim; [] where no precompiled header can be built."""
    global _root
    if not ENABLED or not _is_gcc(compiler):
        return []
    key = (compiler, *flags, *defines)
    with _lock:  # the kit's thread checks build kernels from several threads at once
        if key not in _dirs:
            if _root is None:
                _root = tempfile.mkdtemp(prefix="dk_metal_pch_")
                atexit.register(shutil.rmtree, _root, True)
            d = os.path.join(_root, str(len(_dirs)))
            os.mkdir(d)
            # the shim and <vector>, which the harness includes after the kernel (hostcheck.harness_source): names
            # in std:: only, which no kernel uses
            # as `metal_stdlib` beside the .gch: g++ reads it where the .gch is found but cannot be used (a source
            # whose first line is another header, e.g. <metal_math>, which includes <metal_stdlib> in turn)
            head = os.path.join(d, "metal_stdlib")
            Path(head).write_text(f'#include "{shim_dir / "metal_stdlib"}"\n#include <vector>\n')
            cmd = [compiler, *flags, *(f"-D{x}" for x in defines), f"-I{shim_dir}", "-x", "c++-header", head,
                   "-o", os.path.join(d, "metal_stdlib.gch")]
            try:
                ok = run_compiler(cmd, what=os.path.basename(compiler)).returncode == 0
            except Exception:  # noqa: BLE001 - any failure: build without it
                ok = False
            _dirs[key] = d if ok else None
        d = _dirs[key]
    return [f"-I{d}"] if d else []


_clang_pch: dict[tuple[str, ...], str | None] = {}


def libclang_pch(args: list[str], shim_dir: Path) -> list[str]:
    """["-include-pch", file] for a libclang parse with `args` (the syntax check's, less -fsyntax-only) of a source
    whose first line includes <metal_stdlib>: the shim parsed once by libclang itself and saved (~0.17 -> ~0.08 s a
    check; the shim's include guard makes the source's own #include a no-op, so diagnostics and their lines are
    the same). [] where it cannot be built."""
    global _root
    if not ENABLED:
        return []
    key = tuple(args)
    with _lock:
        if key not in _clang_pch:
            if _root is None:
                _root = tempfile.mkdtemp(prefix="dk_metal_pch_")
                atexit.register(shutil.rmtree, _root, True)
            head = os.path.join(_root, f"clang{len(_clang_pch)}.hpp")
            Path(head).write_text(f'#include "{shim_dir / "metal_stdlib"}"\n')
            pch = head + ".pch"
            try:
                import clang.cindex as ci
                hargs = [("c++-header" if a == "c++" else a) for a in args]
                tu = ci.Index.create().parse(head, args=hargs, options=ci.TranslationUnit.PARSE_INCOMPLETE)
                ok = not any(d.severity >= ci.Diagnostic.Error for d in tu.diagnostics)
                if ok:
                    tu.save(pch)
            except Exception:  # noqa: BLE001 - any failure: parse the headers as before
                ok = False
            _clang_pch[key] = pch if ok else None
        pch = _clang_pch[key]
    return ["-include-pch", pch] if pch else []
