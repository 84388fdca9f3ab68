"""NVRTC (CUDA C++ source -> PTX or cubin, in process) through NVIDIA's maintained binding, `cuda.bindings.nvrtc`
(cuda-python). The library is the one `toolchain.nvrtc()` found (DEVICEKIT_NVRTC, the pip wheel, a toolkit): it is
loaded by path before the binding's first call, so the binding's own lookup (cuda-pathfinder) finds it loaded by its
soname instead of searching, which also works in a venv layered on another.

Loaded on first use only (never when the plugin is imported or devices are listed).
"""

from __future__ import annotations

import ctypes
import threading

from . import toolchain


class NVRTCError(RuntimeError):
    """NVRTC failed; `log` is the program log (compiler diagnostics) when there is one."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


class NVRTC:
    def __init__(self, path: str, origin: str = ""):
        self.path, self.origin = path, origin
        _preload_builtins(path)
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)  # this file, not whichever libnvrtc the binding would find
        try:
            from cuda.bindings import nvrtc
        except ImportError as e:
            raise OSError(f"cuda-python's binding is missing ({e}): pip install 'cuda-bindings>=13.2,<14'") from e
        self.n = nvrtc
        self.version = tuple(self._ok(nvrtc.nvrtcVersion(), "nvrtcVersion"))
        try:
            self.supported_archs = tuple(self._ok(nvrtc.nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs"))
        except NVRTCError:
            self.supported_archs = ()

    def _ok(self, res: tuple, what: str, log: str = ""):
        """The values after the status of a binding call; NVRTCError naming the call and the status otherwise."""
        status, *values = res
        if status != self.n.nvrtcResult.NVRTC_SUCCESS:
            msg = self.n.nvrtcGetErrorString(status)[1].decode(errors="replace")
            raise NVRTCError(f"{what} failed: {msg} ({int(status)})", log)
        return values[0] if len(values) == 1 else values

    def compile(self, src: str, name: str, options: list[str], cubin: bool = False) -> tuple[bytes, str]:
        """Compile `src`; return (PTX text as bytes, or a cubin when `cubin`, and the program log)."""
        data, log, _ = self.compile_named(src, name, options, cubin=cubin)
        return data, log

    def compile_named(self, src: str, name: str, options: list[str], cubin: bool = False,
                      headers: dict[str, str] | None = None, name_exprs: tuple[str, ...] = ()
                      ) -> tuple[bytes, str, dict[str, str]]:
        """Compile `src` with in-memory `headers` ({include name: text}) and NVRTC name expressions (a kernel's
        source name or a template instantiation such as "matrixMul<32>"); return (PTX or cubin, the log, {name
        expression: lowered (mangled) name})."""
        n, headers = self.n, headers or {}
        prog = self._ok(n.nvrtcCreateProgram(src.encode(), f"{name}.cu".encode(), len(headers),
                                             [v.encode() for v in headers.values()], [k.encode() for k in headers]),
                        "nvrtcCreateProgram")
        try:
            for e in name_exprs:
                self._ok(n.nvrtcAddNameExpression(prog, e.encode()), "nvrtcAddNameExpression")
            opts = [o.encode() for o in options]
            (status,) = n.nvrtcCompileProgram(prog, len(opts), opts)
            size = self._ok(n.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
            buf = _out(size)
            self._ok(n.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
            log = bytes(buf).rstrip(b"\0").decode(errors="replace").strip()
            self._ok((status,), "nvrtcCompileProgram", log)
            lowered = {e: self._ok(n.nvrtcGetLoweredName(prog, e.encode()), f"nvrtcGetLoweredName({e})").decode()
                       for e in name_exprs}
            get_size, get = (n.nvrtcGetCUBINSize, n.nvrtcGetCUBIN) if cubin else (n.nvrtcGetPTXSize, n.nvrtcGetPTX)
            size = self._ok(get_size(prog), get_size.__name__)
            out = _out(size)
            self._ok(get(prog, out), get.__name__)
            return (bytes(out) if cubin else bytes(out).rstrip(b"\0")), log, lowered
        finally:
            n.nvrtcDestroyProgram(prog)


def _out(size: int) -> bytearray:
    """A fresh writable buffer for the binding to fill (`char *log`, `char *ptx`, `char *cubin`). Never `bytes`, though
    the binding's docstrings say bytes and NVIDIA's examples write `b" " * size`: the binding writes into whatever
    bytes it is given, and `b" " * 1` (an empty log is one NUL) is CPython's one shared `b" "`, so every `b" "` in the
    process would become `b"\\0"` (`os.environ[k] = " "` then fails with "embedded null byte"; Ray's driver gets
    empty arrays back from its actors)."""
    return bytearray(size)


def _preload_builtins(path: str) -> None:
    """NVRTC dlopens libnvrtc-builtins.so.X.Y by name at compile time; some builds find it next to themselves, others
    only on the loader path. Loading the copies beside `path` first makes that lookup succeed either way."""
    import glob
    import os
    for p in sorted(glob.glob(os.path.join(os.path.dirname(os.path.realpath(path)), "libnvrtc-builtins.so*"))):
        if ".alt." in os.path.basename(p):
            continue
        try:
            ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            pass


_lock = threading.Lock()
_loaded: NVRTC | None = None


def load() -> NVRTC:
    """The process's NVRTC (found by toolchain.nvrtc()); raises NVRTCError naming every place searched."""
    global _loaded
    with _lock:
        if _loaded is None:
            found, searched = toolchain.nvrtc()
            if found is None:
                raise NVRTCError("NVRTC not found (pip install nvidia-cuda-nvrtc, or set DEVICEKIT_NVRTC); searched: "
                                 + ", ".join(searched))
            try:
                _loaded = NVRTC(found.path, found.origin)
                from devicekit.debug import dprint
                dprint(2, f"CUDA: loaded NVRTC {'.'.join(map(str, _loaded.version))} from {found.path} ({found.origin})")
            except OSError as e:
                raise NVRTCError(f"NVRTC at {found.path} ({found.origin}) failed to load: {e}") from e
        return _loaded
