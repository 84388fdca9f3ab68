"""Run a kernel with red zones: every buffer is a view into a larger allocation whose bytes before and after it hold
a known pattern, checked after the launch. A store that lands outside its buffer (a vector store past the tail, a
bounds check that let an index through) changes a red zone and is reported by param and side, where the plain run
might corrupt a neighbour silently and crash the process later.

Used by the differential fuzzer (`fuzz.Runner.check_one`) on devices whose allocator has views
(`supports("offset")`); the zones are read back with `copyout`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

PAD = 256  # bytes of red zone on each side: a multiple of 64, so views keep the allocator's alignment
PATTERN = 0xA5


class RedZoneError(AssertionError):
    """A launch wrote outside a buffer: which param, which side, how many bytes."""


def supported(device: Any) -> bool:
    return device.allocator.supports("offset")


def run(kernel: Any, device: Any, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    """`dk.run(kernel, device, **inputs)` with every param in red zones; RedZoneError when one was written."""
    from devicekit.ir.accept import host_array
    from devicekit.memory import Buffer

    program = device.compile(kernel)
    spec = program.spec
    vals = [inputs[v.name] if v.scalar is not None else float(inputs[v.name]) if v.is_float else int(inputs[v.name])
            for v in spec.vars]  # as dk.run passes them
    var_vals = spec.check_vars(vals)
    sizes = spec.buffer_sizes(var_vals)
    views, bases, shapes = [], [], {}
    for p, n in zip(spec.user_params, sizes):
        given = inputs.get(p.name)
        arr = None if given is None else host_array(given, p.dtype)
        count = n if arr is None else arr.size // p.dtype.count
        nbytes = count * p.dtype.nbytes
        base = Buffer(device, nbytes + 2 * PAD, "uint8")
        device.allocator.copyin(base.handle, memoryview(np.full(nbytes + 2 * PAD, PATTERN, np.uint8)))
        view = base.view(count, p.dtype, offset=PAD)
        view.copyin(arr if arr is not None else np.zeros(count * p.dtype.count, p.dtype.np))
        if arr is not None:
            shapes[p.name] = np.asarray(given).shape
        views.append(view)
        bases.append((p.name, base, nbytes))
    program.execute(views, vals, wait=True)
    for name, base, nbytes in bases:
        # copied out, not mapped: CUDA maps only host=True buffers to the host (found on an H200: every fuzz kernel
        # failed there with NotImplementedError while the host emulation, which maps everything, passed)
        raw = np.empty(nbytes + 2 * PAD, np.uint8)
        device.allocator.copyout(memoryview(raw), base.handle)
        for side, zone in (("before", raw[:PAD]), ("after", raw[PAD + nbytes:])):
            bad = np.flatnonzero(zone != PATTERN)
            if bad.size:
                where = PAD - bad[0] if side == "before" else bad[-1] + 1  # the farthest byte written
                raise RedZoneError(f"{spec.name}: the launch wrote {bad.size} byte(s) {side} param {name!r} "
                                   f"({nbytes} bytes), up to {where} byte(s) {side} it")
    out = {}
    for p, view in zip(spec.user_params, views):
        if p.writable:
            a = view.numpy()
            shape = shapes.get(p.name)
            out[p.name] = a.reshape(shape) if shape is not None and int(np.prod(shape)) == a.size else a
    return out
