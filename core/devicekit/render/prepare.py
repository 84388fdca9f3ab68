"""The render layer's lowering step: what the core does to a linear kernel for every renderer, between the IR's
`lower` and the renderer's `render_linear`, so that a renderer implements only its language.

`prepare` lowers the kernel for the renderer's `Capabilities`, runs the renderer's extra linear passes
(`Capabilities.passes`, tinygrad's `extra_matcher`: each a function from the linear op list to a new one, in
order), then checks the launch limits every GPU language has: the threads of a constant workgroup against
`local_total_max` and the bytes of its local arrays against `shared_max`, one `KernelError` naming the kernel, the
value and the limit. `shared_bytes` is the one byte count (the ProgramSpec's `shared_bytes` meta) and `hoist_locals`
the pass for languages that declare local arrays only at the kernel's function scope (OpenCL C, MSL).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from ..ir.ops import Ops
from ..ir.uop import KernelError, UOp

Pass = Callable[[list[UOp]], list[UOp]]  # a linear pass: the op list in order -> a new op list in order


def shared_bytes(lk: Any) -> int:
    """Bytes of local (shared / threadgroup / workgroup) memory the kernel's local arrays declare."""
    return sum(u.dtype.nbytes * u.arg[1] for u in lk.uops if u.op is Ops.DEFINE_LOCAL)


def const_threads(dims: Sequence[Any] | None) -> int | None:
    """Threads per workgroup of a launch's local size when every dim is a constant (None: symbolic or no local
    size; 1 for an empty one): what the threads-per-workgroup limit is checked against."""
    if not dims:
        return None if dims is None else 1
    p = 1
    for d in dims:
        if not isinstance(d, int):
            return None
        p *= d
    return p


def check_limits(lk: Any, caps: Any, name: str, device: str) -> None:
    """KernelError when a constant workgroup has more threads than `caps.local_total_max`, or the local arrays more
    bytes than `caps.shared_max` (checked where the renderer has local memory and states a limit); one message
    shape for every renderer: kernel, value, limit and the capability that sets it."""
    where = device or "this renderer"
    threads = const_threads(lk.local_size)
    limit = getattr(caps, "local_total_max", None)
    if threads is not None and limit is not None and threads > limit:
        raise KernelError(f"kernel {name!r} launches {threads} threads a workgroup (local size "
                          f"{tuple(lk.local_size)}); {where} allows at most {limit} (local_total_max)")
    if caps.has_local and caps.shared_max:
        nbytes = shared_bytes(lk)
        if nbytes > caps.shared_max:
            arrays = ", ".join(f"{u.arg[0]}: {u.dtype.nbytes * u.arg[1]}" for u in lk.uops if u.op is Ops.DEFINE_LOCAL)
            raise KernelError(f"kernel {name!r} declares {nbytes} bytes of local memory ({arrays}); {where} allows "
                              f"at most {caps.shared_max} a workgroup (shared_max)")


def hoist_locals(uops: list[UOp]) -> list[UOp]:
    """Every DEFINE_LOCAL (it has no sources) first: for languages that declare local arrays only at the kernel's
    function scope. A pass (`Capabilities.passes`)."""
    locs = [u for u in uops if u.op is Ops.DEFINE_LOCAL]
    return uops if not locs else locs + [u for u in uops if u.op is not Ops.DEFINE_LOCAL]


def with_uops(lk: Any, uops: list[UOp]) -> Any:
    """`lk` with another op list (`lk` itself when it is the same list)."""
    if uops == list(lk.uops):
        return lk
    if dataclasses.is_dataclass(lk):
        return dataclasses.replace(lk, uops=uops)
    new = copy.copy(lk)
    new.uops = uops
    return new


def run_passes(lk: Any, passes: Sequence[Pass]) -> Any:
    """`lk` after each pass in order."""
    if not passes:
        return lk
    uops = list(lk.uops)
    for p in passes:
        uops = p(uops)
    return with_uops(lk, uops)


def prepare(kernel: Any, caps: Any, name: str | None = None, device: str = "", where: str = "render") -> Any:
    """The linear kernel a renderer renders: `kernel` lowered for `caps`, its passes run and its limits checked."""
    from ..ir.accept import as_kernel
    from ..ir.linearize import lower
    lk = lower(as_kernel(kernel, where), caps)
    lk = run_passes(lk, getattr(caps, "passes", ()))
    check_limits(lk, caps, name or lk.name, device)
    return lk
