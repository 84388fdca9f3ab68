"""ctypes bindings for nvJitLink: PTX -> cubin for one real architecture, in process."""

from __future__ import annotations

import ctypes
import threading

from . import toolchain

_RESULTS = {
    0: "NVJITLINK_SUCCESS", 1: "NVJITLINK_ERROR_UNRECOGNIZED_OPTION", 2: "NVJITLINK_ERROR_MISSING_ARCH",
    3: "NVJITLINK_ERROR_INVALID_INPUT", 4: "NVJITLINK_ERROR_PTX_COMPILE", 5: "NVJITLINK_ERROR_NVVM_COMPILE",
    6: "NVJITLINK_ERROR_INTERNAL", 7: "NVJITLINK_ERROR_THREADPOOL", 8: "NVJITLINK_ERROR_UNRECOGNIZED_INPUT",
    9: "NVJITLINK_ERROR_FINALIZE", 10: "NVJITLINK_ERROR_NULL_INPUT", 11: "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS",
    12: "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE", 13: "NVJITLINK_ERROR_ARCH_MISMATCH",
    14: "NVJITLINK_ERROR_OUTDATED_LIBRARY", 15: "NVJITLINK_ERROR_MISSING_FATBIN",
}
INPUT_PTX = 2


class NvJitLinkError(RuntimeError):
    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


class NvJitLink:
    def __init__(self, path: str, origin: str = ""):
        self.path, self.origin = path, origin
        c = ctypes
        lib = c.CDLL(path)
        lib.nvJitLinkCreate.argtypes = [c.POINTER(c.c_void_p), c.c_uint32, c.POINTER(c.c_char_p)]
        lib.nvJitLinkDestroy.argtypes = [c.POINTER(c.c_void_p)]
        lib.nvJitLinkAddData.argtypes = [c.c_void_p, c.c_int, c.c_void_p, c.c_size_t, c.c_char_p]
        lib.nvJitLinkComplete.argtypes = [c.c_void_p]
        for fn in ("nvJitLinkGetLinkedCubinSize", "nvJitLinkGetErrorLogSize", "nvJitLinkGetInfoLogSize"):
            getattr(lib, fn).argtypes = [c.c_void_p, c.POINTER(c.c_size_t)]
        for fn in ("nvJitLinkGetLinkedCubin", "nvJitLinkGetErrorLog", "nvJitLinkGetInfoLog"):
            getattr(lib, fn).argtypes = [c.c_void_p, c.c_void_p]
        self.lib = lib
        self.version = (0, 0)
        if hasattr(lib, "nvJitLinkVersion"):
            lib.nvJitLinkVersion.argtypes = [c.POINTER(c.c_uint), c.POINTER(c.c_uint)]
            major, minor = c.c_uint(), c.c_uint()
            if lib.nvJitLinkVersion(c.byref(major), c.byref(minor)) == 0:
                self.version = (major.value, minor.value)

    def _log(self, handle, size_fn, get_fn) -> str:
        c = ctypes
        size = c.c_size_t()
        if size_fn(handle, c.byref(size)) != 0 or size.value == 0:
            return ""
        buf = c.create_string_buffer(size.value)
        get_fn(handle, buf)
        return buf.value.decode(errors="replace").strip()

    def link_ptx(self, ptx: bytes, arch: str, name: str = "kernel", options: list[str] | None = None) -> bytes:
        """Assemble and link one PTX module into a cubin for `arch` ("sm_90")."""
        c, lib = ctypes, self.lib
        opts = [f"-arch={arch}", *(options or [])]
        arr = (c.c_char_p * len(opts))(*[o.encode() for o in opts])
        handle = c.c_void_p()
        r = lib.nvJitLinkCreate(c.byref(handle), len(opts), arr)
        if r != 0:
            raise NvJitLinkError(f"nvJitLinkCreate({' '.join(opts)}) failed: {_RESULTS.get(r, r)}")
        try:
            data = ptx if ptx.endswith(b"\0") else ptx + b"\0"
            buf = c.create_string_buffer(data, len(data))
            r = lib.nvJitLinkAddData(handle, INPUT_PTX, buf, len(data), f"{name}.ptx".encode())
            if r == 0:
                r = lib.nvJitLinkComplete(handle)
            if r != 0:
                log = self._log(handle, lib.nvJitLinkGetErrorLogSize, lib.nvJitLinkGetErrorLog)
                raise NvJitLinkError(f"nvJitLink failed for {arch}: {_RESULTS.get(r, r)}", log)
            size = c.c_size_t()
            r = lib.nvJitLinkGetLinkedCubinSize(handle, c.byref(size))
            out = c.create_string_buffer(size.value)
            if r == 0:
                r = lib.nvJitLinkGetLinkedCubin(handle, out)
            if r != 0:
                raise NvJitLinkError(f"nvJitLinkGetLinkedCubin failed: {_RESULTS.get(r, r)}")
            return out.raw[:size.value]
        finally:
            lib.nvJitLinkDestroy(c.byref(handle))


_lock = threading.Lock()
_loaded: NvJitLink | None = None


def load() -> NvJitLink:
    global _loaded
    with _lock:
        if _loaded is None:
            found, searched = toolchain.nvjitlink()
            if found is None:
                raise NvJitLinkError("nvJitLink not found (pip install nvidia-nvjitlink, or set DEVICEKIT_NVJITLINK); "
                                     "searched: " + ", ".join(searched))
            try:
                _loaded = NvJitLink(found.path, found.origin)
                from devicekit.debug import dprint
                dprint(2, f"CUDA: loaded nvJitLink {'.'.join(map(str, _loaded.version))} from {found.path} ({found.origin})")
            except OSError as e:
                raise NvJitLinkError(f"nvJitLink at {found.path} ({found.origin}) failed to load: {e}") from e
        return _loaded
