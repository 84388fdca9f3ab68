"""Launch sizes checked before a runtime enqueues anything.

A driver given a bad size does not always say so: PoCL dies with SIGILL on 2^32 work-groups and runs nothing, with
no error, for a local size of 0 or a negative global size. `check_values` refuses what no device can run (a size that
is not a non-negative int, a local size of 0, more than 3 axes); `check_limits` refuses what this device cannot run,
naming the limit. Every refusal is one `LaunchError` (a ValueError) that names the program, the size and the limit.

The two names mean, on every device: `global_size` counts work-groups (CUDA: blocks of the grid; Metal:
threadgroups of the grid), `local_size` counts work-items per group (CUDA: threads per block; Metal: threads per
threadgroup). A global size of 0 on an axis is an empty launch: nothing runs, as for a loop of 0 iterations.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import LaunchError

__all__ = ["LaunchError", "Limits", "check", "check_limits", "check_values"]

MAX_AXES = 3


@dataclass(frozen=True)
class Limits:
    """What one device accepts; an empty tuple or None means no limit of that kind. `groups`/`items` are the
    device's own words for the two sizes (CUDA: "grid"/"block"), used in messages."""

    device: str
    max_axes: int = MAX_AXES
    max_local: tuple[int, ...] = ()  # work-items per group, per axis (CL_DEVICE_MAX_WORK_ITEM_SIZES, maxBlockDim)
    max_group_items: int | None = None  # work-items per group, all axes (CL_DEVICE_MAX_WORK_GROUP_SIZE)
    max_groups: tuple[int, ...] = ()  # work-groups per axis (CUDA's maxGridDim)
    max_global: tuple[int, ...] = ()  # work-items per axis, groups * local (size_t, uint thread ids)
    max_total_groups: int | None = None  # work-groups, all axes (PoCL: fewer than 2^32)
    why_total_groups: str = ""
    groups: str = "global_size"
    items: str = "local_size"


def _dims(name: str, what: str, dims: Any, least: int) -> tuple[int, ...] | None:
    if dims is None:
        return None
    if isinstance(dims, numbers.Integral) and not isinstance(dims, bool):
        dims = (dims,)
    if not isinstance(dims, (tuple, list)):
        raise LaunchError(f"{name}: {what} must be a tuple of ints (one per axis), got {type(dims).__name__} "
                          f"{dims!r}")
    if len(dims) > MAX_AXES:
        raise LaunchError(f"{name}: {what}={tuple(dims)} has {len(dims)} axes; launches have at most {MAX_AXES}")
    for a, x in enumerate(dims):
        if isinstance(x, bool) or not isinstance(x, numbers.Integral):
            raise LaunchError(f"{name}: {what}[{a}] must be an int, got {type(x).__name__} {x!r}")
        if x < least:
            why = "a group has at least one work-item" if least else "a size is 0 or more"
            raise LaunchError(f"{name}: {what}[{a}] = {int(x)} is below {least} ({why})")
    return tuple(int(x) for x in dims)


def check_values(name: str, global_size: Any, local_size: Any, words: tuple[str, str] = ("global_size", "local_size")
                 ) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """Both sizes as tuples of ints (None stays None), or a LaunchError: not ints, more than 3 axes, a negative
    global size, a local size below 1. `words` name the two in messages."""
    return _dims(name, words[0], global_size, 0), _dims(name, words[1], local_size, 1)


def check_limits(name: str, groups: Sequence[int], local: Sequence[int], limits: Limits) -> None:
    """A LaunchError naming the first limit of `limits` that `groups` x `local` (already checked values) exceeds."""
    dev, g_name, l_name = limits.device, limits.groups, limits.items
    n = max(len(groups), len(local))
    if n > limits.max_axes:
        raise LaunchError(f"{name}: {n} launch axes; {dev} has {limits.max_axes}")
    for a, (x, m) in enumerate(zip(local, limits.max_local)):
        if x > m:
            raise LaunchError(f"{name}: {l_name}[{a}] = {x} exceeds {dev}'s limit of {m} work-items on axis {a} "
                              f"(limits per axis: {limits.max_local})")
    if limits.max_group_items is not None and math.prod(local) > limits.max_group_items:
        raise LaunchError(f"{name}: {l_name}={tuple(local)} is {math.prod(local)} work-items per group; {dev} runs at "
                          f"most {limits.max_group_items}")
    for a, (x, m) in enumerate(zip(groups, limits.max_groups)):
        if x > m:
            raise LaunchError(f"{name}: {g_name}[{a}] = {x} exceeds {dev}'s limit of {m} groups on axis {a} "
                              f"(limits per axis: {limits.max_groups})")
    loc = tuple(local) + (1,) * (n - len(local))
    for a, (x, lo, m) in enumerate(zip(groups, loc, limits.max_global)):
        if x * lo > m:
            raise LaunchError(f"{name}: {g_name}[{a}] x {l_name}[{a}] = {x} x {lo} = {x * lo} work-items on axis {a}; "
                              f"{dev} runs at most {m}")
    if limits.max_total_groups is not None and math.prod(groups) > limits.max_total_groups:
        raise LaunchError(f"{name}: {g_name}={tuple(groups)} is {math.prod(groups)} groups; {dev} runs at most "
                          f"{limits.max_total_groups}{limits.why_total_groups}")


def check(name: str, global_size: Any, local_size: Any, limits: Limits) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """`check_values`, then `check_limits` on the sizes as launched (a missing size is one group / item)."""
    g, lo = check_values(name, global_size, local_size)
    g, lo = g or (1,), lo or (1,)
    check_limits(name, g, lo, limits)
    return g, lo
