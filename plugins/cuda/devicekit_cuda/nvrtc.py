"""ctypes bindings for NVRTC: CUDA C++ source -> PTX, in process.

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
        lib = ctypes.CDLL(path)
        c = ctypes
        lib.nvrtcVersion.argtypes = [c.POINTER(c.c_int), c.POINTER(c.c_int)]
        lib.nvrtcGetErrorString.restype = c.c_char_p
        lib.nvrtcGetErrorString.argtypes = [c.c_int]
        lib.nvrtcCreateProgram.argtypes = [c.POINTER(c.c_void_p), c.c_char_p, c.c_char_p, c.c_int,
                                           c.POINTER(c.c_char_p), c.POINTER(c.c_char_p)]
        lib.nvrtcDestroyProgram.argtypes = [c.POINTER(c.c_void_p)]
        lib.nvrtcCompileProgram.argtypes = [c.c_void_p, c.c_int, c.POINTER(c.c_char_p)]
        for fn in ("nvrtcGetPTXSize", "nvrtcGetProgramLogSize", "nvrtcGetCUBINSize"):
            getattr(lib, fn).argtypes = [c.c_void_p, c.POINTER(c.c_size_t)]
        for fn in ("nvrtcGetPTX", "nvrtcGetProgramLog", "nvrtcGetCUBIN"):
            getattr(lib, fn).argtypes = [c.c_void_p, c.c_char_p]
        self.lib = lib
        major, minor = c.c_int(), c.c_int()
        self._check(lib.nvrtcVersion(c.byref(major), c.byref(minor)), "nvrtcVersion")
        self.version = (major.value, minor.value)
        self.supported_archs = self._supported_archs()

    def _supported_archs(self) -> tuple[int, ...]:
        c, lib = ctypes, self.lib
        try:
            n = c.c_int()
            lib.nvrtcGetNumSupportedArchs.argtypes = [c.POINTER(c.c_int)]
            lib.nvrtcGetSupportedArchs.argtypes = [c.POINTER(c.c_int)]
            self._check(lib.nvrtcGetNumSupportedArchs(c.byref(n)), "nvrtcGetNumSupportedArchs")
            arr = (c.c_int * n.value)()
            self._check(lib.nvrtcGetSupportedArchs(arr), "nvrtcGetSupportedArchs")
            return tuple(arr)
        except (AttributeError, NVRTCError):
            return ()

    def _check(self, status: int, what: str, log: str = "") -> None:
        if status != 0:
            msg = self.lib.nvrtcGetErrorString(status).decode(errors="replace")
            raise NVRTCError(f"{what} failed: {msg} ({status})", log)

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
        c, lib = ctypes, self.lib
        prog = c.c_void_p()
        headers = headers or {}
        hsrc = (c.c_char_p * max(1, len(headers)))(*[v.encode() for v in headers.values()])
        hnames = (c.c_char_p * max(1, len(headers)))(*[k.encode() for k in headers])
        self._check(lib.nvrtcCreateProgram(c.byref(prog), src.encode(), f"{name}.cu".encode(), len(headers),
                                           hsrc if headers else None, hnames if headers else None),
                    "nvrtcCreateProgram")
        try:
            if name_exprs:
                lib.nvrtcAddNameExpression.argtypes = [c.c_void_p, c.c_char_p]
                lib.nvrtcGetLoweredName.argtypes = [c.c_void_p, c.c_char_p, c.POINTER(c.c_char_p)]
                for e in name_exprs:
                    self._check(lib.nvrtcAddNameExpression(prog, e.encode()), "nvrtcAddNameExpression")
            opts = [o.encode() for o in options]
            arr = (c.c_char_p * len(opts))(*opts)
            status = lib.nvrtcCompileProgram(prog, len(opts), arr)
            size = c.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, c.byref(size))
            buf = c.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, buf)
            log = buf.value.decode(errors="replace").strip()
            self._check(status, "nvrtcCompileProgram", log)
            lowered = {}
            for e in name_exprs:
                out_name = c.c_char_p()
                self._check(lib.nvrtcGetLoweredName(prog, e.encode(), c.byref(out_name)), f"nvrtcGetLoweredName({e})")
                lowered[e] = out_name.value.decode()  # owned by the program: copied before it is destroyed
            get_size, get = (lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN) if cubin else (lib.nvrtcGetPTXSize, lib.nvrtcGetPTX)
            self._check(get_size(prog, c.byref(size)), get_size.__name__)
            out = c.create_string_buffer(size.value)
            self._check(get(prog, out), get.__name__)
            data = out.raw[:size.value]
            return (data if cubin else data.rstrip(b"\0")), log, lowered
        finally:
            lib.nvrtcDestroyProgram(c.byref(prog))


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
