"""The native call of a one-thread CPU launch as straight-line Python generated once per program.

`list(map(ptr, handles)) + vals` and `fn(*args, 0, extent)` cost ~0.3 us a launch above the ctypes call itself (the
floor: ~0.7 us for 7 arguments on a loaded 2-core host); a call with its arguments spelled out, each handle's
address read in place, does not. `direct(program, handles, vals)` makes the call and returns True when the launch
runs on one thread (no split, or an extent below the program's threading threshold); False: nothing was called,
the caller takes the threaded path. `long(vals)` is `may_run_long` for a split kernel whose cost per outer
iteration is a constant (work = extent x cost): one comparison against `long_below`, the extent of
INTERRUPTIBLE_MIN_WORK operations (it compared against the threading threshold, so every split launch from the main
thread paid the launcher thread's handoff, ~20 us on a 2-core KVM guest).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import CodeType
from typing import Any

from devicekit.ir.ops import Ops


def compile_direct(spec: Any, n_handles: int, serial_below: int, split_fn: Callable | None, tail: tuple = (),
                   long_below: int = 0) -> tuple[Callable, Callable | None]:
    """(direct, long) for a program whose native arguments are its handles then its vars (then the split's bounds,
    then `tail`: a split reduction's scratch address, 0 on one thread). `long` is None when the launch's work is not
    extent x a constant."""
    names = tuple(v.name for v in spec.vars)
    env: dict[str, Any] = {"SPLIT": split_fn, "SERIAL": serial_below, "LONG": long_below}
    ptrs = [f"handles[{i}].ptr" for i in range(n_handles)]
    vals = [f"vals[{j}]" for j in range(len(names))]
    lines = ["def direct(program, handles, vals):", f"    if len(handles) != {n_handles}:", "        return False"]
    split = spec.core_split
    if split is None:
        lines += [f"    program._fn({', '.join(ptrs + vals)})", "    return True"]
    else:
        extent = (f"vals[{names.index(split.arg[0])}]" if getattr(split, "op", None) is Ops.VAR
                  and split.arg[0] in names else repr(int(split)) if isinstance(split, int) else "SPLIT(vals)")
        lines += [f"    e = {extent}", "    if e >= SERIAL:", "        return False",
                  f"    program._fn({', '.join([*ptrs, *vals, '0', 'e', *map(repr, tail)])})", "    return True"]
    long_src = None
    if split is not None and long_below:
        long_src = f"def long(vals):\n    return {extent} >= LONG"
    exec(_code("\n".join(lines), f"<devicekit-cpu launch of {spec.name}>"), env)  # noqa: S102
    if long_src is not None:
        exec(_code(long_src, f"<devicekit-cpu may_run_long of {spec.name}>"), env)  # noqa: S102
    return env["direct"], env.get("long")


@functools.lru_cache(maxsize=256)
def _compiled(src: str) -> CodeType:
    return compile(src, "<devicekit-cpu launch>", "exec")


def _code(src: str, filename: str) -> CodeType:
    """The code of `src`, compiled once per text (kernels of one signature share it: ~70 us of each program's load),
    named `filename` for tracebacks."""
    code = _compiled(src)
    inner = tuple(c.replace(co_filename=filename) if isinstance(c, CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=inner)
