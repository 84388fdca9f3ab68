"""Which OpenCL devices are OPENCL:0, OPENCL:1, ...: one platform (DEVICEKIT_OPENCL_PLATFORM, else the first with a
GPU, else the first with any device, of those whose compiler builds a one-line kernel) and its devices
(DEVICEKIT_OPENCL_DEVICE), in the platform's order: the core's devicekit.platforms makes the choice, this module asks
the driver (platforms, devices and their types, the smoke build). The probe ranks a GPU above the CPU device and
anything else (PoCL's host-CPU device, an accelerator) below it, so installing PoCL never changes the default device."""

from __future__ import annotations

import functools
from typing import Any

from devicekit import platforms
from devicekit.platforms import Selection, Unavailable, choose_platform, first_error_line
from devicekit.plugin import Availability

from . import settings

__all__ = ["Selection", "Unavailable", "count", "device", "probe", "select"]

NO_PLATFORM = ("no OpenCL platform found: install your GPU vendor's OpenCL driver (ICD), or PoCL for the host CPU "
               "(pip install 'devicekit-opencl[pocl]')")
_SMOKE = "__kernel void dk_smoke(__global int *x) { x[get_global_id(0)] += 1; }"

_builds: dict[tuple[str, str, str], str | None] = {}  # (platform, version, device) -> None, or why it cannot build


def _type_of(dev: Any) -> str:
    import pyopencl as cl
    return next((t for t in ("gpu", "cpu", "accelerator") if dev.type & getattr(cl.device_type, t.upper())), "other")


def _platforms() -> list[Any]:
    try:
        import pyopencl as cl
    except ImportError as e:
        raise Unavailable(f"pyopencl cannot be imported ({e}): pip install pyopencl") from e
    try:
        return list(cl.get_platforms())
    except Exception as e:
        raise Unavailable(f"{NO_PLATFORM} ({type(e).__name__}: {e})") from e


def _devices(p: Any) -> list[Any]:
    try:
        return list(p.get_devices())
    except Exception:  # noqa: BLE001 - DEVICE_NOT_FOUND: a platform without devices
        return []


def build_log(prg: Any, dev: Any) -> str:
    """The driver's build log of `prg` on `dev`, "" when it gives none (the log is a courtesy: the error stands)."""
    import pyopencl as cl
    try:
        return str(prg.get_build_info(dev, cl.program_build_info.LOG)).strip()
    except Exception:  # noqa: BLE001
        return ""


def _build_failure(plat: Any, dev: Any) -> str | None:
    """None when `dev`'s compiler builds a one-line kernel, else the first error line of its log. Two PoCLs on one
    machine are common (a distribution's and pyopencl's wheel); an old one's LLVM may not know the host CPU and fail
    every build ("unknown target CPU 'generic'"): a platform that cannot build is skipped with that reason."""
    key = (plat.name, plat.version, dev.name)
    if key not in _builds:
        import pyopencl as cl
        prg = None
        try:
            prg = cl.Program(cl.Context([dev]), _SMOKE)
            prg.build(devices=[dev])
            _builds[key] = None
        except Exception as e:  # noqa: BLE001 - any build or context failure makes the platform unusable here
            _builds[key] = first_error_line((build_log(prg, dev) if prg is not None else "") or str(e), repr(e))
    return _builds[key]


def select() -> Selection:
    """The platform and devices in use; Unavailable says why none."""
    return _select(settings.get("DEVICEKIT_OPENCL_PLATFORM"), *settings.get("DEVICEKIT_OPENCL_DEVICE"))


@functools.cache  # per value of the two variables (two first calls at once may both try the smoke build: harmless)
def _select(want: str | None, kind: str, idx: tuple[int, ...]) -> Selection:
    plats = _platforms()
    if not plats:
        raise Unavailable(NO_PLATFORM)
    plat, devs = choose_platform(want, plats, api="OpenCL", var="DEVICEKIT_OPENCL_PLATFORM", devices_of=_devices,
                                 type_of=_type_of, failure=_build_failure,
                                 describe=lambda p: f"{p.name} ({p.version.split('  ')[0]})")
    return Selection.of(plat, devs, (kind, idx), _type_of, api="OpenCL", var="DEVICEKIT_OPENCL_DEVICE")


def device(index: int) -> Any:
    """The pyopencl.Device of OPENCL:index."""
    return select().device("OPENCL", index)


def probe() -> Availability:
    """Available when a platform with devices is found, ranked above the CPU device only when one of them is a GPU
    (PoCL's host-CPU device stays below it)."""
    return platforms.probe(lambda: select().devices, lambda d: _type_of(d) == "gpu")


def count() -> int:
    return len(select().devices)
