"""`per_index`: one object per device id, made on first use and kept for the process: a driver's context (OpenCL's
context and queue, a WebGPU device) is shared by that id's compiler, allocator and runtime, and one id's must never
meet another's. `programs_in` is the RuntimeFactory over such a context. Reads no environment variables."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["per_index", "programs_in"]

T = TypeVar("T")


def per_index(make: Callable[[int], T]) -> Callable[[int], T]:
    """`make(index)` once per index, under one lock, so two threads asking at once get the same object; a `make` that
    raises keeps nothing (the next call tries again and raises the reason again). The made objects are the
    function's `made` dict."""
    lock = threading.Lock()
    made: dict[int, T] = {}

    @functools.wraps(make)
    def get(index: int) -> T:
        with lock:
            if index not in made:
                made[index] = make(index)
            return made[index]
    get.made = made  # type: ignore[attr-defined]
    return get


def programs_in(context: Callable[[int], T], program: Callable[[Any, T], Any]) -> Callable[[Any], Callable[[Any], Any]]:
    """A RuntimeFactory (devicekit.plugin): for a DeviceSpec, its id's `context(spec.index)` first (a missing device
    fails here, with the reason, rather than at the first program), then `program(compiled, ctx)` for each
    CompiledSpec."""
    def factory(spec: Any) -> Callable[[Any], Any]:
        ctx = context(spec.index)
        return lambda compiled: program(compiled, ctx)
    return factory
