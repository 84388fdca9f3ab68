"""The user's front door, above the registry: `dk.device`, `dk.target`, `dk.devices` (the process-wide registry's
lookups), `dk.run` (compile, copy in, launch, copy out in one call) and `resolve_device`, which turns a device name
into a Device for the contracts that accept either (`Buffer(device="CPU")`). The contracts below (memory, runtime,
targets, ...) never import this module at their top level; `devicekit/__init__` offers its names lazily."""

from __future__ import annotations

from typing import Any

from .registry import DeviceInfo, device, devices, register_plugin, target, unregister_plugin
from .spec import DeviceSpec
from .targets import Device

__all__ = ["DeviceInfo", "device", "devices", "register_plugin", "resolve_device", "run", "target",
           "unregister_plugin"]


def resolve_device(dev: Device | DeviceSpec | str | None) -> Device:
    """A Device as given, else the registry's device for a spec or name (None: the default device)."""
    if dev is None or isinstance(dev, (str, DeviceSpec)):
        return device(dev)
    return dev


def run(kernel: Any, device: Any = None, **named: Any) -> dict[str, Any]:
    """Compile `kernel` for `device` (a Device, a spec string, or None for the default), run it once and return
    every writable param as a numpy array, by name.

    Named arguments: one numpy array per param (dtype and size checked; writable params may be omitted: they are
    allocated zeroed, sized from the vars) and one int per var. Arrays passed in are never modified. A returned
    array has the shape of the array passed for it when the sizes agree, else it is flat.
    """
    import numpy as np

    from .memory import Buffer, BufferOptions

    dev = resolve_device(device)
    program = dev.compile(kernel)
    spec = program.spec
    pnames, vnames = [p.name for p in spec.params], [v.name for v in spec.vars]
    if extra := sorted(set(named) - set(pnames) - set(vnames)):
        raise TypeError(f"{spec.name}: unexpected argument(s) {', '.join(extra)}; the kernel takes params "
                        f"{', '.join(pnames) or 'none'} and vars {', '.join(vnames) or 'none'}")
    if missing := [v for v in vnames if v not in named]:
        raise TypeError(f"{spec.name}: missing int var(s) {', '.join(missing)}")
    vals = []
    for v in vnames:
        x = named[v]
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
            raise TypeError(f"{spec.name}: var {v!r} must be an int, got {type(x).__name__}")
        vals.append(int(x))
    var_vals = spec.check_vars(vals)
    sizes = spec.buffer_sizes(var_vals)
    buffers, shapes = [], {}
    for p, n in zip(spec.params, sizes):
        if p.name in named:
            arr = np.asarray(named[p.name])
            lanes = p.dtype.count
            if arr.size % lanes:
                raise ValueError(f"{spec.name}: param {p.name!r} is {p.dtype}; {arr.size} scalars is not a whole "
                                 f"number of {lanes}-lane elements")
            try:
                buf = Buffer(dev, arr.size // lanes, p.dtype).copyin(arr)
            except (TypeError, ValueError) as e:
                raise type(e)(f"{spec.name}: param {p.name!r}: {e}") from None
            shapes[p.name] = arr.shape
        elif p.writable:
            buf = Buffer(dev, n, p.dtype, BufferOptions(zero=True))
        else:
            raise TypeError(f"{spec.name}: missing input array for param {p.name!r} ({p.dtype}, {n} elements)")
        buffers.append(buf)
    program.execute(buffers, vals, wait=True)
    out = {}
    for p, buf in zip(spec.params, buffers):
        if p.writable:
            a = buf.numpy()
            shape = shapes.get(p.name)
            out[p.name] = a.reshape(shape) if shape is not None and int(np.prod(shape)) == a.size else a
    return out
