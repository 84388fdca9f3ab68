"""A tiny ctypes view of the CUDA driver (libcuda), for probing only: is there a driver, how many devices,
which compute capability. Running kernels goes through pycuda (runtime.py); this never creates a context.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from dataclasses import dataclass

CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


@dataclass(frozen=True)
class DriverState:
    ok: bool
    reason: str = ""  # why not, in words
    version: int = 0  # cuDriverGetVersion, e.g. 13000
    count: int = 0
    lib: str = ""


def _load() -> tuple[ctypes.CDLL | None, str, str]:
    from . import settings
    names = [lib] if (lib := settings.get("DEVICEKIT_LIBCUDA")) else []
    names += ["libcuda.so.1", "libcuda.so"]
    found = ctypes.util.find_library("cuda")
    if found:
        names.append(found)
    errors = []
    for n in names:
        try:
            return ctypes.CDLL(n), n, ""
        except OSError as e:
            if "No such file" not in str(e) and "cannot open shared object" not in str(e):
                errors.append(f"{n}: {e}")  # present but broken: worth showing
    return None, "", "; ".join(errors)


@functools.cache
def state() -> DriverState:
    lib, name, err = _load()
    if lib is None:
        return DriverState(False, (f"the CUDA driver library failed to load: {err}" if err else
                                   "no CUDA driver: libcuda.so.1 not found (no NVIDIA driver installed)"))
    r = lib.cuInit(0)
    if r != 0:
        reason = {100: "no CUDA-capable device is detected", 35: "the driver is older than the CUDA runtime",
                  999: "unknown driver error", 3: "the driver failed to initialize"}.get(r, f"cuInit error {r}")
        return DriverState(False, f"the CUDA driver ({name}) is present but cuInit failed: {reason}", lib=name)
    ver, cnt = ctypes.c_int(), ctypes.c_int()
    lib.cuDriverGetVersion(ctypes.byref(ver))
    if lib.cuDeviceGetCount(ctypes.byref(cnt)) != 0 or cnt.value == 0:
        return DriverState(False, f"the CUDA driver ({name}) is present but reports no device", ver.value, 0, name)
    return DriverState(True, "", ver.value, cnt.value, name)


@functools.cache
def compute_capability(index: int) -> tuple[int, int] | None:
    st = state()
    if not st.ok or not 0 <= index < st.count:
        return None
    lib = ctypes.CDLL(st.lib)
    dev, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    if lib.cuDeviceGet(ctypes.byref(dev), index) != 0:
        return None
    lib.cuDeviceGetAttribute(ctypes.byref(major), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    lib.cuDeviceGetAttribute(ctypes.byref(minor), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    return major.value, minor.value
