"""Metal compilers: MSL source -> bytes a MetalProgram loads.

Two toolchains, offered as two compiler pairs on macOS (the registry tries the better one first and says when it fell
back, so the one in use is always on record: `target.pair_names`, `target.fallback_reason`, the compiler identity
in every CompiledSpec and in the compile-cache key):

- `MetalXcrunCompiler` ("xcrun"): Xcode's `xcrun metal` (MSL -> AIR) then `xcrun metallib` (AIR -> metallib). The
  bytes are a real metallib (b"MTLB..."), cached on disk like any object code, loaded with newLibraryWithData.
  Needs Xcode's Metal toolchain; without it the pair is skipped with the reason.
- `MetalCompiler` ("metal"): `MTLDevice.newLibraryWithSource_options_error_` through pyobjc. Metal cannot serialize
  a library built from source, so after the source is compiled (and any error reported, at compile time) the bytes are
  a small container `MAGIC_SOURCE + source`; the runtime builds the library from it again (Metal's own shader cache
  makes that cheap).

Both compile with fast math off (safe math mode), so NaN/Inf and precise rounding hold as the reference expects.
Elsewhere than macOS the pair still builds (so `dk.target("METAL")` renders), and `compile` raises CompileError
saying what is needed.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import tempfile

from devicekit.compile import Compiler
from devicekit.compile.subproc import failure_message, run_compiler
from devicekit.errors import CompileError

from . import env

MAGIC_SOURCE = b"DKMSLSRC1\n"  # container of a source compiled in process (see module docstring)
MAGIC_METALLIB = b"MTLB"  # every metallib starts with this
MSL_BF16_VERSION = "3.1"  # bfloat needs Metal Shading Language 3.1 (macOS 14)


def needs_msl_version(src: str) -> str | None:
    """The MSL version a rendered source needs beyond the OS default (None: the default is fine)."""
    return MSL_BF16_VERSION if re.search(r"\bbfloat\b", src) else None


def macos_version() -> str:
    return platform.mac_ver()[0] or "unknown"


def _unavailable(src: str = "") -> CompileError:
    return CompileError(f"cannot compile for METAL: {env.compile_unavailable_reason()}", src=src)


class MetalCompiler(Compiler):
    """In-process compile with MTLDevice.newLibraryWithSource_options_error_ (pyobjc)."""

    name = "metal"
    toolchain = "MTLDevice.newLibraryWithSource"

    def __init__(self, device_index: int = 0):
        self.device_index = device_index

    def __reduce__(self):
        return (type(self), (self.device_index,))

    def identity(self) -> str:
        if env.compile_unavailable_reason() is not None:
            return f"metal:newLibraryWithSource:unavailable-on-{env.os_name()}"
        return f"metal:newLibraryWithSource:macOS-{macos_version()}:safe-math"

    def compile_src(self, src: str) -> bytes:
        if env.compile_unavailable_reason() is not None:
            raise _unavailable(src)
        from .mtl import compile_library, metal_context
        ctx = metal_context(self.device_index)
        compile_library(ctx.device, src)  # raises CompileError with Metal's log on failure
        return MAGIC_SOURCE + src.encode()

    def disassemble(self, lib: bytes) -> str:
        """There is no public disassembler for Apple GPU code: say so (in parentheses, as `devicekit compile` expects)."""
        return ("(no disassembly: Metal compiles MSL to a private GPU ISA inside the driver; with Xcode's Metal "
                "toolchain the `xcrun` pair shows the AIR (LLVM IR) instead)")


class MetalXcrunCompiler(Compiler):
    """Offline compile with Xcode's `xcrun metal` + `xcrun metallib` into a metallib."""

    name = "metal-xcrun"
    toolchain = "xcrun metal + metallib"

    def __init__(self):
        tools = env.xcrun_metal()
        if tools is None:
            raise RuntimeError("Xcode's Metal toolchain was not found (`xcrun -sdk macosx -find metal` failed; install "
                               "Xcode and its Metal toolchain: `xcodebuild -downloadComponent MetalToolchain`); "
                               "compiling in process with MTLDevice.newLibraryWithSource instead")
        self.metal, self.metallib = tools

    def __reduce__(self):
        return (type(self), ())

    @functools.cached_property
    def _version(self) -> str:
        try:
            p = run_compiler(["xcrun", "-sdk", "macosx", "metal", "--version"], timeout=60)
            return (p.stdout or p.stderr).strip().splitlines()[0] if (p.stdout or p.stderr).strip() else "unknown"
        except (CompileError, IndexError):
            return "unknown"

    def identity(self) -> str:
        return f"metal-xcrun:{self._version}:macOS-{macos_version()}:-fno-fast-math"

    def disassemble(self, src: str) -> str:
        """The AIR (Metal's LLVM IR) of `src`, from `xcrun metal -S -emit-llvm`: the last stage Apple lets you see."""
        std = needs_msl_version(src)
        flags = ["-fno-fast-math"] + ([f"-std=metal{std}"] if std else [])
        with tempfile.TemporaryDirectory(prefix="dk_metal_") as d:
            path = os.path.join(d, "kernel.metal")
            with open(path, "w") as f:
                f.write(src)
            p = run_compiler(["xcrun", "-sdk", "macosx", "metal", "-x", "metal", *flags, "-S", "-emit-llvm", path,
                              "-o", "-"], what="metal")
        if p.returncode != 0:
            raise CompileError(f"metal -S -emit-llvm failed (exit {p.returncode})", log=p.stderr, src=src)
        return p.stdout

    def compile_tracked(self, src: str, ctx) -> tuple[bytes, None]:
        """Hand-written MSL: `xcrun metal` takes include_dirs= and defines= as -I/-D (with the working dir for quoted
        includes); the files read are the reader's inclusion list."""
        return self.compile_src(src, [f"-I{ctx.cwd}", *ctx.cc_args()]), None

    def compile_src(self, src: str, extra: list[str] | None = None) -> bytes:
        std = needs_msl_version(src)
        flags = ["-fno-fast-math"] + ([f"-std=metal{std}"] if std else []) + list(extra or [])
        with tempfile.TemporaryDirectory(prefix="dk_metal_") as d:
            metal_path, air, lib = (os.path.join(d, n) for n in ("kernel.metal", "kernel.air", "kernel.metallib"))
            with open(metal_path, "w") as f:
                f.write(src)
            for cmd in (["xcrun", "-sdk", "macosx", "metal", "-x", "metal", *flags, "-c", metal_path, "-o", air],
                        ["xcrun", "-sdk", "macosx", "metallib", air, "-o", lib]):
                p = run_compiler(cmd, what=cmd[3])
                if p.returncode != 0:
                    raise CompileError(failure_message(p, cmd[3]) or f"{cmd[3]} rejected the kernel (exit "
                                       f"{p.returncode})", log=p.stderr or p.stdout, src=src)
            with open(lib, "rb") as f:
                data = f.read()
        if not data.startswith(MAGIC_METALLIB):
            raise CompileError("xcrun metallib produced something that is not a metallib", src=src)
        return data
