"""The OpenCL spelling of launch sizes: `global_work_size=` counts work-items, as clEnqueueNDRangeKernel and pyopencl
do, and `local_work_size=` work-items per group. devicekit's own `global_size=` counts work-groups (tinygrad's
convention, the same on every device), so a pyopencl user passing work-items as `global_size` launched local_size
times too many; `global_work_size` says which one is meant. Translated here into (work-groups, local size), then
checked like any launch (devicekit.launch_sizes)."""

from __future__ import annotations

from typing import Any

from devicekit import launch_sizes
from devicekit.errors import LaunchError

WORK_OPTIONS = ("global_work_size", "local_work_size")


def to_groups(name: str, global_size: Any, local_size: Any, global_work_size: Any, local_work_size: Any,
              reqd: tuple[int, ...] | None) -> tuple[Any, Any]:
    """(global_size in work-groups, local_size) from the OpenCL spelling. Without `local_work_size` a group is the
    kernel's reqd_work_group_size, else one work-item; each global work size must be a multiple of its local one
    (OpenCL 1.2's rule, and devicekit launches whole groups)."""
    if global_size is not None and global_work_size is not None:
        raise LaunchError(f"{name}: pass global_size (work-groups) or global_work_size (work-items), not both")
    if local_size is not None and local_work_size is not None:
        raise LaunchError(f"{name}: pass local_size or local_work_size (the same thing: work-items per group), "
                          "not both")
    local = local_size if local_work_size is None else local_work_size
    if global_work_size is None:
        return global_size, local
    items, lo = launch_sizes.check_values(name, global_work_size, local, WORK_OPTIONS)
    items = items or (1,)
    if lo is None:
        lo = reqd[:len(items)] if reqd is not None else (1,) * len(items)
    if len(lo) != len(items):
        raise LaunchError(f"{name}: global_work_size={items} has {len(items)} axes, local_work_size={lo} "
                          f"{len(lo)}: give one local size per axis")
    for a, (n, k) in enumerate(zip(items, lo)):
        if n % k:
            raise LaunchError(f"{name}: global_work_size[{a}] = {n} is not a multiple of local_work_size[{a}] = {k}: "
                              f"round it up to {-(-n // k) * k} and skip the extra work-items in the kernel")
    return tuple(n // k for n, k in zip(items, lo)), lo
