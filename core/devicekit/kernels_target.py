"""What the kernel library asks of the device a kernel is built for: its register file, the default device, tiles
that divide a size. Shared by kernels.py (softmax) and kernels_matmul.py."""

from __future__ import annotations

from typing import Any

from .ir.optimize import tile_rows
from .render.renderer import Capabilities

__all__ = ["tile_rows"]


def _pick_tile(size: int, want: int) -> int:
    t = max(1, min(want, size))
    while size % t:
        t -= 1
    return t


def _check_dims(what: str, **dims: int) -> None:
    for nm, v in dims.items():
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{what} {nm} must be a positive int, got {v!r}")


def _capabilities(device: Any) -> Capabilities | None:
    """The renderer Capabilities of `device=` (a Device, a Target or Capabilities); None for None."""
    if device is None:
        return None
    caps = device if isinstance(device, Capabilities) else getattr(getattr(device, "renderer", None), "capabilities",
                                                                     None)
    if not isinstance(caps, Capabilities):
        raise TypeError(f"device= takes a Device or Target (dk.device(...), dk.target(...)) or a renderer's "
                        f"Capabilities, got {type(device).__name__}")
    return caps


def _register_lanes(device: Any, itemsize: int) -> int:
    """Lanes of `itemsize` bytes in a sixteenth of `device`'s vector register file, at most 64 bytes (one AVX-512
    register: 16 float32 from its 32 x 64 bytes; AVX2's 16 x 32 bytes and an unknown file: 32 bytes, 8); 2..16."""
    caps = _capabilities(device)
    regs = 0 if caps is None else caps.vector_register_bytes
    return max(2, min(16, min(64, regs // 16 or 32) // itemsize))


def _default_target(device: Any) -> Any:
    """`device`, or the default device's Target when it is None (what a kernel built without one most likely runs
    on: DEVICEKIT_DEVICE, else the available kind of highest priority); None when there is no usable one."""
    if device is not None:
        return device
    try:
        from .registry import get_registry
        reg = get_registry()
        return reg.target(reg.default_spec())
    except Exception:  # noqa: BLE001 - no usable default device: the kernel is built for none
        return None
