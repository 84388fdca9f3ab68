"""CUDACompiler: CUDA C++ -> PTX (NVRTC, in process) -> cubin for one real arch (nvJitLink, or ptxas).

Two link steps exist, one per compiler pair:
  * "nvrtc"        NVRTC -> PTX -> nvJitLink (pip wheel nvidia-nvjitlink), the default;
  * "nvrtc-ptxas"  NVRTC -> PTX -> ptxas (CUDA toolkit), the fallback when nvJitLink is missing or unusable.
Constructing a compiler loads its libraries and checks its tools, so a pair whose toolchain is missing fails at
construction with the reason, and the registry records it (`devicekit info` shows the pair used and why the
better one was skipped). Nothing here needs a GPU.
"""

from __future__ import annotations

import os
import threading

from devicekit.compile import Compiler
from devicekit.debug import dprint
from devicekit.errors import CompileError

from . import arch as archmod
from . import toolchain

LINKERS = ("nvjitlink", "ptxas")
# NVRTC 13.0 and 13.1 miscompile a gated load in an unrolled loop: its address lands one element past the right one.
# Found by the shapes fuzzer on an H200 (seed 700054: 0 for -1 at 4 of 64 outputs); the PTX of 13.0.48, 13.0.88 and
# 13.1.115 adds (1 - n) * 8 to the address where 13.2.86 to 13.5.37 add -n * 8. Older NVRTCs are refused, never used
MIN_NVRTC = (13, 2)


def default_flags() -> list[str]:
    """NVRTC flags: no FMA contraction (MULACC and a*b+c round twice, as the reference computes them; set
    DEVICEKIT_CUDA_FMAD=1 to allow FMA), then extra flags from $DEVICEKIT_CUDA_FLAGS. All are part of the identity,
    so of the cache key."""
    from . import settings
    return [f"--fmad={'true' if settings.get('DEVICEKIT_CUDA_FMAD') else 'false'}",
            *settings.get("DEVICEKIT_CUDA_FLAGS")]


class CUDACompiler(Compiler):
    def __init__(self, arch: str = archmod.DEFAULT_ARCH, linker: str = "nvjitlink", flags: list[str] | None = None,
                 arch_origin: str = ""):
        if linker not in LINKERS:
            raise ValueError(f"linker must be one of {LINKERS}, got {linker!r}")
        from . import nvrtc
        self.arch = archmod.normalize(arch)
        self.arch_origin = arch_origin
        self.linker = linker
        self.flags = list(default_flags() if flags is None else flags)
        self.nvrtc = nvrtc.load()
        if self.nvrtc.version < MIN_NVRTC:
            least = "{}.{}".format(*MIN_NVRTC)
            raise RuntimeError(f"NVRTC {self.nvrtc.version[0]}.{self.nvrtc.version[1]} miscompiles some kernels (an "
                               f"address one element off); devicekit-cuda needs NVRTC >= {least}: pip install "
                               f"'nvidia-cuda-nvrtc>={least}' 'nvidia-nvjitlink>={least}', or point DEVICEKIT_NVRTC "
                               "at a newer libnvrtc")
        self.notes: list[str] = []  # things the user should know (ptxas .version lowering, ...)
        self._notes_lock = threading.Lock()
        num = archmod.number(self.arch)
        if self.nvrtc.supported_archs and num not in self.nvrtc.supported_archs:
            raise ValueError(f"NVRTC {self.nvrtc.version[0]}.{self.nvrtc.version[1]} cannot target {self.arch}; it "
                             f"supports sm_{', sm_'.join(map(str, self.nvrtc.supported_archs))}")
        if linker == "nvjitlink":
            from . import nvjitlink
            self.jitlink = nvjitlink.load()
            if self.jitlink.version != (0, 0) and self.jitlink.version < self.nvrtc.version:
                raise RuntimeError(f"nvJitLink {self.jitlink.version[0]}.{self.jitlink.version[1]} is older than NVRTC "
                                   f"{self.nvrtc.version[0]}.{self.nvrtc.version[1]} and cannot read its PTX; "
                                   "upgrade nvidia-nvjitlink")
            self.link_version = "{}.{}".format(*self.jitlink.version)
            self.name = "nvrtc"
        else:
            from . import ptxas
            self.ptxas_path = ptxas.path()
            self.link_version = ptxas.version(self.ptxas_path) or "unknown"
            self.name = "nvrtc-ptxas"
        inc, _ = toolchain.include_dir()
        self.include = inc

    # ---- identity: everything that changes the bytes
    def identity(self) -> str:
        nv = "{}.{}".format(*self.nvrtc.version)
        inc = self.include.origin if self.include else "no-headers"
        return (f"{self.name} nvrtc-{nv} {self.linker}-{self.link_version} arch={self.arch} "
                f"flags={' '.join(self.nvrtc_options(needs_headers=False))} headers=[{inc}]")

    def nvrtc_options(self, needs_headers: bool) -> list[str]:
        # --device-as-default-execution-space: NVRTC 13.0 and 13.1 took the generic lambda of dk_map (a half or
        # bool vector op, lane by lane) for a host function and refused the kernel (found on an H200). They are
        # refused now (MIN_NVRTC); the flag stays as a guard, since in JIT mode nothing can be a host function
        opts = [f"--gpu-architecture={archmod.virtual(self.arch)}", "--device-as-default-execution-space", *self.flags]
        if needs_headers and self.include is not None:
            opts.append(f"--include-path={self.include.path}")
        return opts

    # ---- the two steps
    def to_ptx(self, src: str, name: str = "kernel") -> bytes:
        from .nvrtc import NVRTCError
        needs_headers = "#include <cuda_fp16.h>" in src or "#include <cuda_bf16.h>" in src
        if needs_headers and self.include is None:
            _, searched = toolchain.include_dir()
            raise CompileError("this kernel uses half/bfloat16 and needs cuda_fp16.h / cuda_bf16.h, which were not "
                               "found (pip install nvidia-cuda-runtime, or set DEVICEKIT_CUDA_INCLUDE); searched: "
                               + ", ".join(searched), src=src)
        try:
            ptx, log = self.nvrtc.compile(src, name, self.nvrtc_options(needs_headers))
        except NVRTCError as e:
            raise CompileError(f"NVRTC {self.nvrtc.version[0]}.{self.nvrtc.version[1]} rejected the kernel "
                               f"({self.arch}): {e}", e.log, src) from e
        if log:
            dprint(2, f"NVRTC log for {name}:\n{log}")
        return ptx

    def link(self, ptx: bytes, name: str = "kernel") -> bytes:
        if self.linker == "nvjitlink":
            from .nvjitlink import NvJitLinkError
            try:
                return self.jitlink.link_ptx(ptx, self.arch, name)
            except NvJitLinkError as e:
                raise CompileError(f"nvJitLink {self.link_version} failed to build a cubin for {self.arch}: {e}",
                                   e.log or ptx.decode(errors="replace")) from e
        from . import ptxas
        notes: list[str] = []
        try:
            cubin = ptxas.assemble(ptx, self.arch, notes=notes)
        except ptxas.PtxasError as e:
            raise CompileError(f"ptxas {self.link_version} failed for {self.arch}: {e}", e.log) from e
        for n in notes:
            self._note(n)
        return cubin

    def _note(self, msg: str) -> None:
        with self._notes_lock:
            if msg in self.notes:
                return
            self.notes.append(msg)
        dprint(1, f"CUDA compiler: {msg}")

    def compile_src(self, src: str) -> bytes:
        name = _kernel_name(src)
        return self.link(self.to_ptx(src, name), name)

    # ---- hand-written kernels (devicekit_cuda.source): C++ linkage, templates, the CUDA headers, host includes
    def source_options(self) -> tuple[list[str], str]:
        """NVRTC options for hand-written source: the CUDA headers (cuda_fp16, cooperative_groups, ...) and CCCL
        (cuda/std, cub) on the include path without any flag from the user; and the id of that setup."""
        from .host_headers import STUBS_ID
        cccl, _ = toolchain.cccl_include_dir()
        opts = self.nvrtc_options(needs_headers=True)
        if cccl is not None:
            opts.append(f"--include-path={cccl.path}")
        setup = (f"cuda-headers=[{self.include.origin if self.include else 'none'}] "
                 f"cccl=[{cccl.origin if cccl else 'none'}] host-stubs={STUBS_ID}")
        return opts, setup

    def compile_source(self, src: str, name_expr: str, search=None, device_headers=(), own_headers=()
                       ) -> tuple[bytes, str]:
        """(cubin, lowered name of `name_expr`) of a hand-written kernel; `search` (include dirs, defines: what the
        signature reader was given, source.search_path()) adds those dirs but the first (the working dir, where
        NVRTC finds the file's quoted includes itself) and the defines, so reader and compiler see one setup.
        `device_headers` ((include name, text), ...: the file's own headers with their host code blanked,
        host_code.device_headers) go to NVRTC in memory, before the files on disk; `own_headers` (the names of the
        file's own headers) get no host-header stand-in."""
        from .host_headers import PRELUDE_NAME, stubs_for
        from .nvrtc import NVRTCError
        opts, _ = self.source_options()
        opts.append(f"--pre-include={PRELUDE_NAME}")
        if search is not None:
            dirs, defines = search
            opts += [*(f"--include-path={d}" for d in dirs[1:]), *(f"--define-macro={d}" for d in defines)]
        headers = {**stubs_for(tuple(own_headers), cccl=toolchain.cccl_include_dir()[0] is not None),
                   **dict(device_headers)}
        base = name_expr.split("<")[0].split("::")[-1].strip() or "kernel"
        try:
            ptx, log, lowered = self.nvrtc.compile_named(src, base, opts, headers=headers, name_exprs=(name_expr,))
        except NVRTCError as e:
            hint = ""
            if "cannot open source file" in (e.log or ""):
                hint = (" (NVRTC compiles device code only and reads no host headers: the C and C++ standard "
                        "headers, POSIX's and host libraries' (cuBLAS, cuFFT, ...) get stand-ins, and host code is "
                        "blanked; the CUDA headers and CCCL are on its include path, DEVICEKIT_CUDA_INCLUDE / "
                        "DEVICEKIT_CUDA_CCCL change where from)")
            raise CompileError(f"NVRTC {self.nvrtc.version[0]}.{self.nvrtc.version[1]} rejected {name_expr} "
                               f"({self.arch}){hint}: {e}", e.log, src) from e
        if log:
            dprint(2, f"NVRTC log for {name_expr}:\n{log}")
        return self.link(ptx, base), lowered[name_expr]

    def _source_ident(self, expr: str) -> str:
        _, setup = self.source_options()
        return f"{self.identity()} source {setup} entry={expr}"

    def cache_key(self, spec):
        """A hand-written kernel's key also names its header setup and entry (the cubin and its lowered name are one
        entry, with its dependency manifest); a generated kernel's is the base class's."""
        expr = spec.get_meta("name_expr")
        if expr is None:
            return super().cache_key(spec)
        import hashlib

        from devicekit.compile.cache import CacheKey
        search = spec.get_meta("cuda_search")
        ident = self._ctx_ident(spec, self._source_ident(expr)) + (f" search={search!r}" if search else "")
        if heads := spec.get_meta("cuda_headers"):  # the own headers as NVRTC gets them (host code blanked)
            ident += f" headers={hashlib.sha256(repr(heads).encode()).hexdigest()[:16]}"
        return CacheKey(spec.device, ident, hashlib.sha256(spec.src.encode()).hexdigest())

    def compile(self, spec):
        """Generated kernels: the base class (compile_src, cached by source). A hand-written kernel (its spec names
        an NVRTC name expression) compiles with name expressions; the cubin and the lowered name the runtime loads
        are cached under the source, the entry and the header setup, and the name goes to meta["symbol"]."""
        expr = spec.get_meta("name_expr")
        if expr is None:
            return super().compile(spec)
        import dataclasses

        from devicekit.compile.compiler import CompiledSpec
        ident = self._source_ident(expr)
        search = spec.get_meta("cuda_search")

        def build() -> tuple[bytes, None]:
            lib, sym = self.compile_source(spec.src, expr, search, spec.get_meta("cuda_headers") or (),
                                           spec.get_meta("cuda_own_headers") or ())
            return sym.encode() + b"\0" + lib, None  # files read: the reader's inclusion list (NVRTC has no -MD)

        both, cached = self.tracked(spec, self.cache_key(spec), build)
        sym, _, lib = both.partition(b"\0")
        return CompiledSpec(dataclasses.replace(spec, meta=spec.meta + (("symbol", sym.decode()),)), lib, ident,
                            trusted=True, from_cache=cached)

    def disassemble(self, lib: bytes) -> str:
        """SASS of a cubin via cuobjdump/nvdisasm when the toolkit has one (a debugging aid)."""
        import shutil
        import tempfile

        from devicekit.compile.subproc import run_compiler
        exe = shutil.which("cuobjdump") or next((p for r, _ in toolchain._toolkit_roots()
                                                 if os.path.isfile(p := os.path.join(r, "bin", "cuobjdump"))), None)
        if exe is None:
            return "(cuobjdump not found)"
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(lib)
            f.flush()
            return run_compiler([exe, "-sass", f.name], what="cuobjdump").stdout

    def __reduce__(self):
        return (type(self), (self.arch, self.linker, self.flags, self.arch_origin))


def _kernel_name(src: str) -> str:
    import re
    m = re.search(r'__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?([A-Za-z_]\w*)\s*\(', src)
    return m.group(1) if m else "kernel"


def make(spec, linker: str) -> CUDACompiler:
    """The compiler for a DeviceSpec: its arch comes from the device when there is one."""
    index = getattr(spec, "index", 0) or 0
    a, origin = archmod.resolve(index)
    return CUDACompiler(a, linker, arch_origin=origin)
