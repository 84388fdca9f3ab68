"""Launch sizes as GPU code states them: in work-items (OpenCL's and pyopencl's spelling), and a kernel's required
work-group size (OpenCL's reqd_work_group_size, WGSL's @workgroup_size).

devicekit's `global_size` counts work-groups on every device (tinygrad's convention: the grid is global_size *
local_size), where clEnqueueNDRangeKernel's and pyopencl's `global_size` counts work-items (Metal's dispatchThreads
too): a user passing work-items as `global_size` launched local_size times too many. `global_work_size=` says which
one is meant. A Program that mixes in `WorkSizes` takes `global_work_size=` / `local_work_size=` in `execute` and in
a call by name (where no param or var has that name), translated by `to_groups` and then checked like any launch.
`with_required` gives a launch without a local size the kernel's required one, and refuses another; `CheckedSizes` is
a program's whole size check (values, required size, the device's limits), done once per sizes asked."""

from __future__ import annotations

from typing import Any

from . import launch_sizes
from .errors import LaunchError

__all__ = ["WORK_OPTIONS", "CheckedSizes", "WorkSizes", "to_groups", "with_required"]

WORK_OPTIONS = ("global_work_size", "local_work_size")


def to_groups(name: str, global_size: Any, local_size: Any, global_work_size: Any, local_work_size: Any,
              default_local: tuple[int, ...] | None = None) -> tuple[Any, Any]:
    """(global_size in work-groups, local_size) from the work-item spelling. Without a local size a group is
    `default_local` (a kernel's required group size), else one work-item; each global work size must be a multiple
    of its local one (OpenCL 1.2's rule, and devicekit launches whole groups). A LaunchError names what was wrong."""
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
        lo = default_local[:len(items)] if default_local is not None else (1,) * len(items)
    if len(lo) != len(items):
        raise LaunchError(f"{name}: global_work_size={items} has {len(items)} axes, local_work_size={lo} "
                          f"{len(lo)}: give one local size per axis")
    for a, (n, k) in enumerate(zip(items, lo)):
        if n % k:
            raise LaunchError(f"{name}: global_work_size[{a}] = {n} is not a multiple of local_work_size[{a}] = {k}: "
                              f"round it up to {-(-n // k) * k} and skip the extra work-items in the kernel")
    return tuple(n // k for n, k in zip(items, lo)), lo


def with_required(name: str, groups: tuple[int, ...], local: tuple[int, ...] | None,
                  required: tuple[int, ...] | None, declares: str = "reqd_work_group_size"
                  ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(groups, local) of one length (checked values: launch_sizes.check_values). Without a local size a group is
    `required` (3 axes, trailing 1s dropped), else one work-item; a kernel that `declares` a required size runs with
    that one only: another is a LaunchError saying what to pass."""
    if not local:
        local = required[:max(i + 1 for i, x in enumerate(required) if x != 1 or i == 0)] if required \
            else (1,) * len(groups)
    n = max(len(local), len(groups))
    groups, local = groups + (1,) * (n - len(groups)), local + (1,) * (n - len(local))
    if required is not None and local + (1,) * (3 - n) != tuple(required):
        want = ", ".join(str(x) for x in required)
        raise LaunchError(f"{name}: the kernel declares {declares}({want}); it was launched with local size {local}: "
                          f"pass local_size=({want}) or leave it out")
    return groups, local


class CheckedSizes:
    """One program's launch sizes, checked (`launch_sizes.check_values`, `with_required`, `launch_sizes.check_limits`
    against `limits`) and kept for the last sizes asked: the check costs ~3 us and a program's launches mostly repeat
    their sizes. Calling it gives (work-groups, work-items a group, work-items), one int per axis, all one length."""

    def __init__(self, name: str, limits: launch_sizes.Limits, required: tuple[int, ...] | None = None):
        self.name, self.limits, self.required = name, limits, required
        self._last: tuple[Any, Any, tuple[tuple[int, ...], ...]] | None = None

    def __call__(self, global_size: Any, local_size: Any) -> tuple[tuple[int, ...], ...]:
        last = self._last
        if last is None or last[0] != global_size or last[1] != local_size:
            groups, local = launch_sizes.check_values(self.name, global_size, local_size)
            groups, local = with_required(self.name, groups or (1,), local, self.required)
            launch_sizes.check_limits(self.name, groups, local, self.limits)
            items = tuple(g * lo for g, lo in zip(groups, local))
            last = self._last = (global_size, local_size, (groups, local, items))
        return last[2]


class WorkSizes:
    """Mix in before `devicekit.runtime.Program`; `default_local` is the local size of a launch that gives none."""

    default_local: tuple[int, ...] | None = None
    execute_adds_options = True  # Program's flag: work-item sizes go to this execute through the core's front

    def execute(self, buffers: Any, vals: Any = (), global_size: Any = None, local_size: Any = None,
                wait: bool = False, *, global_work_size: Any = None, local_work_size: Any = None) -> Any:
        """Program.execute, also with `global_work_size` (work-items) / `local_work_size`."""
        if global_work_size is not None or local_work_size is not None:
            name = self.name  # type: ignore[attr-defined]
            global_size, local_size = to_groups(name, global_size, local_size, global_work_size, local_work_size,
                                                self.default_local)
        return super().execute(buffers, vals, global_size, local_size, wait)  # type: ignore[misc]

    def __call__(self, *args: Any, **named: Any) -> Any:
        """Program.__call__, also taking `global_work_size=` / `local_work_size=` where no param or var has that
        name."""
        if any(k in named for k in WORK_OPTIONS):
            spec = self.spec  # type: ignore[attr-defined]
            taken = {p.name for p in spec.user_params} | {v.name for v in spec.vars}
            if work := {k: named.pop(k) for k in WORK_OPTIONS if k in named and k not in taken}:
                name = self.name  # type: ignore[attr-defined]
                g, lo = to_groups(name, named.pop("global_size", None), named.pop("local_size", None),
                                  work.get("global_work_size"), work.get("local_work_size"), self.default_local)
                named.update({k: v for k, v in (("global_size", g), ("local_size", lo)) if v is not None})
        return super().__call__(*args, **named)  # type: ignore[misc]
