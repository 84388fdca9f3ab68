"""nvJitLink (PTX -> cubin for one real architecture, in process) through NVIDIA's maintained binding,
`cuda.bindings.nvjitlink` (cuda-python). As for NVRTC (nvrtc.py), the library `toolchain.nvjitlink()` found is loaded
by path first, so the binding uses it instead of searching."""

from __future__ import annotations

import ctypes
import threading

from . import toolchain


class NvJitLinkError(RuntimeError):
    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


class NvJitLink:
    def __init__(self, path: str, origin: str = ""):
        self.path, self.origin = path, origin
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)  # this file, not whichever libnvJitLink the binding would find
        try:
            from cuda.bindings import nvjitlink
        except ImportError as e:
            raise OSError(f"cuda-python's binding is missing ({e}): pip install 'cuda-bindings>=13.2,<14'") from e
        self.j = nvjitlink
        try:
            self.version = tuple(nvjitlink.version())
        except nvjitlink.nvJitLinkError:
            self.version = (0, 0)

    def link_ptx(self, ptx: bytes, arch: str, name: str = "kernel", options: list[str] | None = None) -> bytes:
        """Assemble and link one PTX module into a cubin for `arch` ("sm_90")."""
        j = self.j
        opts = [f"-arch={arch}", *(options or [])]
        try:
            handle = j.create(len(opts), opts)
        except j.nvJitLinkError as e:
            raise NvJitLinkError(f"nvJitLinkCreate({' '.join(opts)}) failed: {_status(e)}") from None
        try:
            data = ptx if ptx.endswith(b"\0") else ptx + b"\0"
            try:
                j.add_data(handle, j.InputType.PTX, data, len(data), f"{name}.ptx")
                j.complete(handle)
            except j.nvJitLinkError as e:
                raise NvJitLinkError(f"nvJitLink failed for {arch}: {_status(e)}", self._log(handle)) from None
            try:
                out = bytearray(j.get_linked_cubin_size(handle))
                j.get_linked_cubin(handle, out)
            except j.nvJitLinkError as e:
                raise NvJitLinkError(f"nvJitLinkGetLinkedCubin failed: {_status(e)}") from None
            return bytes(out)
        finally:
            j.destroy(handle)

    def _log(self, handle) -> str:
        try:
            buf = bytearray(self.j.get_error_log_size(handle))
            if not buf:
                return ""
            self.j.get_error_log(handle, buf)
        except self.j.nvJitLinkError:
            return ""
        return bytes(buf).rstrip(b"\0").decode(errors="replace").strip()


def _status(e: Exception) -> str:
    """The result's name ("NVJITLINK_ERROR_PTX_COMPILE"), as the C API spells it."""
    from cuda.bindings import nvjitlink
    try:
        return f"NVJITLINK_{nvjitlink.Result(e.status).name}"
    except (AttributeError, ValueError):
        return str(e)


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
