"""Which OpenCL devices are OPENCL:0, OPENCL:1, ...: one platform (DEVICEKIT_OPENCL_PLATFORM, else the first with a
GPU, else the first with any device, of those whose compiler builds a one-line kernel) and its devices
(DEVICEKIT_OPENCL_DEVICE), in the platform's order. The probe ranks a GPU above the CPU device and anything else
(PoCL's host-CPU device, an accelerator) below it, so installing PoCL never changes the default device."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from devicekit.plugin import Availability

from . import settings

NO_PLATFORM = ("no OpenCL platform found: install your GPU vendor's OpenCL driver (ICD), or PoCL for the host CPU "
               "(pip install 'devicekit-opencl[pocl]')")
_SMOKE = "__kernel void dk_smoke(__global int *x) { x[get_global_id(0)] += 1; }"


class Unavailable(RuntimeError):
    """No usable OpenCL platform or device; the message says why and what to do."""


@dataclass(frozen=True)
class Selection:
    platform: Any  # pyopencl.Platform
    devices: tuple[Any, ...]  # pyopencl.Device, OPENCL:i is devices[i]


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
            log = (build_log(prg, dev) if prg is not None else "") or str(e)
            lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
            _builds[key] = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else repr(e))[:200]
    return _builds[key]


def select() -> Selection:
    """The platform and devices in use; Unavailable says why none."""
    return _select(settings.get("DEVICEKIT_OPENCL_PLATFORM"), *settings.get("DEVICEKIT_OPENCL_DEVICE"))


@functools.cache  # per value of the two variables (two first calls at once may both try the smoke build: harmless)
def _select(want: str | None, kind: str, idx: tuple[int, ...]) -> Selection:
    plat, devs = _platform(want)
    if kind == "index":
        if bad := [i for i in idx if i >= len(devs)]:
            raise Unavailable(f"DEVICEKIT_OPENCL_DEVICE: {plat.name} has {len(devs)} devices, no device {bad[0]}")
        devs = [devs[i] for i in idx]
    elif kind != "all":
        devs = [d for d in devs if _type_of(d) == kind]
    if not devs:
        what = "" if kind in ("all", "index") else f" of type {kind} (DEVICEKIT_OPENCL_DEVICE)"
        raise Unavailable(f"OpenCL platform {plat.name} has no device{what}")
    return Selection(plat, tuple(devs))


def _platform(want: str | None) -> tuple[Any, list[Any]]:
    """The platform and its devices: the one DEVICEKIT_OPENCL_PLATFORM names, else the first with a GPU, else the
    first with any device, of those that build a kernel (each reason kept for the message when none does)."""
    plats = _platforms()
    if not plats:
        raise Unavailable(NO_PLATFORM)
    names = ", ".join(f"{i}: {p.name}" for i, p in enumerate(plats))
    if want is not None:
        return _named(want, plats, names)
    found = [(p, ds) for p in plats if (ds := _devices(p))]
    if not found:
        raise Unavailable(f"no OpenCL platform has a device (platforms: {names})")
    found.sort(key=lambda pd: not any(_type_of(d) == "gpu" for d in pd[1]))  # platforms with a GPU first
    reasons = []
    for p, ds in found:
        if (why := _build_failure(p, ds[0])) is None:
            return p, ds
        reasons.append(f"{p.name} ({p.version.split('  ')[0]}): {why}")
    raise Unavailable("no OpenCL platform here can build a kernel: " + "; ".join(reasons))


def _named(want: str, plats: list[Any], names: str) -> tuple[Any, list[Any]]:
    """The platform DEVICEKIT_OPENCL_PLATFORM names (an index or a part of its name) and its devices."""
    text = want.strip()
    if text.isdigit() and int(text) >= len(plats):
        raise Unavailable(f"DEVICEKIT_OPENCL_PLATFORM={want}: there are {len(plats)} platforms ({names})")
    hits = [plats[int(text)]] if text.isdigit() else [p for p in plats if text.lower() in p.name.lower()]
    if not hits:
        raise Unavailable(f"DEVICEKIT_OPENCL_PLATFORM={want!r} matches no platform ({names})")
    plat, devs = hits[0], _devices(hits[0])
    if devs and (why_not := _build_failure(plat, devs[0])):
        raise Unavailable(f"DEVICEKIT_OPENCL_PLATFORM={want!r}: {plat.name} cannot build a kernel here: {why_not}")
    return plat, devs


def device(index: int) -> Any:
    """The pyopencl.Device of OPENCL:index."""
    sel = select()
    if not 0 <= index < len(sel.devices):
        raise Unavailable(f"OPENCL:{index} does not exist: {sel.platform.name} ({sel.platform.version}) has "
                          f"{len(sel.devices)} device(s)")
    return sel.devices[index]


def probe() -> Availability:
    """Available when a platform with devices is found, ranked above the CPU device only when one of them is a GPU
    (Availability.found: PoCL's host-CPU device stays below it)."""
    try:
        sel = select()
    except Unavailable as e:
        return Availability.no(str(e))
    return Availability.found(gpu=any(_type_of(d) == "gpu" for d in sel.devices))


def count() -> int:
    return len(select().devices)
