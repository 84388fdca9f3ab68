"""Which GPU architecture to compile for: the device's when there is one, else $DEVICEKIT_CUDA_ARCH, else sm_90."""

from __future__ import annotations

import re

DEFAULT_ARCH = "sm_90"
_ARCH = re.compile(r"^sm_(\d{2,3})([af]?)$")


def normalize(arch: str) -> str:
    """'sm_90', '90', 'sm90', 'compute_90', '9.0' -> 'sm_90'; 'sm_90a' keeps its suffix. Raises ValueError."""
    a = arch.strip().lower().replace("compute_", "sm_")
    if re.fullmatch(r"\d+\.\d", a):
        a = "sm_" + a.replace(".", "")
    elif re.fullmatch(r"\d{2,3}[af]?", a):
        a = "sm_" + a
    elif re.fullmatch(r"sm\d{2,3}[af]?", a):
        a = "sm_" + a[2:]
    if not _ARCH.match(a):
        raise ValueError(f"not a CUDA architecture: {arch!r} (expected e.g. sm_80, sm_90, sm_90a)")
    return a


def virtual(arch: str) -> str:
    """sm_90 -> compute_90 (what NVRTC targets when it emits PTX)."""
    return "compute_" + normalize(arch)[3:]


def number(arch: str) -> int:
    m = _ARCH.match(normalize(arch))
    assert m is not None
    return int(m.group(1))


def resolve(index: int = 0) -> tuple[str, str]:
    """(arch, where it came from) for device `index`."""
    from . import driver
    cc = driver.compute_capability(index)
    if cc is not None:
        return f"sm_{cc[0]}{cc[1]}", f"device CUDA:{index}"
    from . import settings
    if env := settings.get("DEVICEKIT_CUDA_ARCH"):
        return env, "$DEVICEKIT_CUDA_ARCH"
    return DEFAULT_ARCH, "default (no device; set DEVICEKIT_CUDA_ARCH to change)"
