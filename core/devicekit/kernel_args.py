"""`set_changed`: a kernel object's arguments set only where they changed since its last launch, for drivers whose
kernel object keeps its arguments between launches and charges for each one set (OpenCL's clSetKernelArg: PoCL's
costs ~6 us of the caller's CPU for a by-value argument; Level Zero's zeKernelSetArgumentValue is the same shape).
devicekit-opencl uses it for each thread's kernel object. Reads no environment variables."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["set_changed"]


def set_changed(set_arg: Callable[[int, Any], None], last: list[Any], args: Sequence[Any],
                convert: Sequence[Callable[[Any], Any]]) -> None:
    """`set_arg(i, convert[i](args[i]))` for each slot where `args[i]` differs from `last[i]`, the argument last set
    there (updated in place). Unchanged is the same object or an equal int, never an equal float (0.0 == -0.0) nor
    an int equal to a float; a slot is None until set, so a `set_arg` that raises leaves it to be set again."""
    for i, (x, old, as_arg) in enumerate(zip(args, last, convert)):
        if old is x or (type(x) is int and type(old) is int and x == old):
            continue
        last[i] = None
        set_arg(i, as_arg(x))
        last[i] = x
