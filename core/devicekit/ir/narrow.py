"""32-bit index arithmetic by proof: may a lowered kernel's 64-bit integer values be computed in 32 bits?

devicekit's index arithmetic (ranges, GPU indices, vars, address math) is int64. A backend without 64-bit integers
(WGSL) must compute it in int32, and one with them (CUDA, OpenCL, Metal) runs faster when it does: int32 multiply
and compare are single instructions on every GPU. Narrowing is exact when every int64 value the kernel computes lies
in int32's range: then no int64 op wrapped and none of the int32 ops that replace them can wrap either (each result
is the same integer), so the kernel computes the same values.

The proof reads the bounds the IR already has (`ir.typing.value_bounds`: ranges end at their extents, vars at their
declared `hi`, GPU indices at their launch extents, arithmetic by interval rules); a value whose bounds are unknown
(an int64 loaded from memory, a loop-carried accumulator, a cast from float) does not fit. `narrow_check` refuses the
first value that does not fit with a KernelError naming it, its bounds and where the bound comes from, worded "does
not support" so that the fuzzer counts it as a documented limit of the target, not a finding. `narrow_plan` accepts
more: a value whose fit depends on the vars' values (`n * m` with both declared up to 2**31 - 1) becomes a guard that
`launch_check` proves again at each launch, with the vars pinned to that launch's values.
"""

from __future__ import annotations

from dataclasses import dataclass

from .dtypes import DType, dtypes
from .ops import Ops
from .rewrite import substitute
from .typing import value_bounds
from .uop import KernelError, UOp

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
# ops whose dtype is not a value computed by the kernel (memory handles, statements)
_NOT_VALUES = frozenset({Ops.PARAM, Ops.DEFINE_LOCAL, Ops.INDEX, Ops.STORE, Ops.BARRIER, Ops.ENDRANGE, Ops.IF,
                         Ops.ENDIF})
_WIDE = (dtypes.int64, dtypes.uint64)


@dataclass(frozen=True)
class Wide:
    """One 64-bit integer value that may not fit in int32: the node and its proven bounds."""

    uop: UOp
    lo: int | float
    hi: int | float

    def describe(self) -> str:
        u = self.uop
        what = f"var {u.arg[0]!r} (declared hi {u.arg[2]})" if u.op is Ops.VAR else u.op.name.lower()
        return f"{what} of dtype {u.dtype.scalar().name} may take values in [{self.lo}, {self.hi}]"


def is_wide(dt: DType) -> bool:
    """Whether dt (or its scalar) is a 64-bit integer dtype."""
    return dt.scalar() in _WIDE


def launch_only(uops: list[UOp]) -> set[UOp]:
    """The values used only as a GPU index's extent (SPECIAL's source: `(n + 255) // 256` work-groups), directly or
    through other such values: the host computes launch dims (`ProgramSpec.launch_dims`), so the kernel never needs
    them, and a backend may leave them out or let them wrap."""
    users: dict[UOp, list[UOp]] = {}
    for u in uops:
        for s in u.src:
            users.setdefault(s, []).append(u)
    dead: set[UOp] = set()
    for u in reversed(uops):
        us = users.get(u)
        if us and all(x.op is Ops.SPECIAL or x in dead for x in us):
            dead.add(u)
    return dead


def wide_values(uops: list[UOp]) -> list[Wide]:
    """Every 64-bit integer value of the linear form `uops` that the bounds do not place inside int32, in order
    (values used only for launch dims excepted: `launch_only`)."""
    out: list[Wide] = []
    skip = launch_only(uops)
    for u in uops:
        if u.op in _NOT_VALUES or not is_wide(u.dtype) or u in skip:
            continue
        lo, hi = value_bounds(u)
        if not (I32_MIN <= lo and hi <= I32_MAX):
            out.append(Wide(u, lo, hi))
    return out


def fits_32(lk) -> bool:
    """Whether every 64-bit integer value of the lowered kernel `lk` is proven to fit in int32 for every launch the
    var bounds allow (narrowing is exact with no launch-time check)."""
    return not wide_values(list(lk.uops)) and not _wide_vars(lk)


def _wide_vars(lk) -> list:
    return [v for v in lk.vars if v.scalar is None and not (I32_MIN <= v.lo and v.hi <= I32_MAX)]


def _unbounded(w: Wide) -> bool:
    """No var value can bound it: the bounds analysis gave up (a loaded int64, an accumulator, a cast from float)."""
    d = w.uop.dtype.scalar()
    return w.lo <= d.min() or w.hi >= d.max()


def narrow_plan(lk, target: str, why: str = "has no 64-bit integers") -> tuple[UOp, ...]:
    """Narrow `lk`'s 64-bit integer arithmetic to int32, by proof: a KernelError ("does not support", naming the
    value) for a value no var bounds can place in int32, else the values whose fit depends on the vars' launch values
    (`n * m` with both declared up to 2**31 - 1): the guards `launch_check` proves again at each launch with the vars
    pinned to their values. An empty tuple: it fits for every launch (`fits_32`). `target` names the backend in the
    message ("WEBGPU"); `why` says why it must narrow."""
    guards: list[UOp] = []
    for w in wide_values(list(lk.uops)):
        if _unbounded(w):
            raise KernelError(f"{target} does not support 64-bit integer values: {w.describe()}, outside int32 (the "
                              f"target {why}; index arithmetic narrows to int32 only where the bounds prove it "
                              "fits: int32 data or bounded vars make it fit)", w.uop)
        guards.append(w.uop)
    for v in _wide_vars(lk):  # the var itself travels as int32
        guards.append(UOp(Ops.VAR, dtypes.int64, (), (v.name, v.lo, v.hi)))
    return tuple(guards)


def launch_check(guards: tuple[UOp, ...], var_vals: dict, target: str, kernel: str) -> None:
    """Prove again, with the vars pinned to this launch's values, that every guard of `narrow_plan` fits in int32;
    a ValueError naming the value and the vars otherwise (nothing ran). Cheap to repeat: callers memoize by values."""
    if not guards:
        return
    pins: dict[UOp, UOp] = {}
    for g in guards:
        for u in g.toposort():
            if u.op is Ops.VAR and u not in pins:
                v = int(var_vals[u.arg[0]])
                pins[u] = UOp(Ops.VAR, u.dtype, (), (u.arg[0], v, v))
    for g in guards:
        lo, hi = value_bounds(substitute(g, pins))
        if not (I32_MIN <= lo and hi <= I32_MAX):
            vals = ", ".join(f"{u.arg[0]}={int(var_vals[u.arg[0]])}" for u in pins)
            what = f"var {g.arg[0]!r}" if g.op is Ops.VAR else f"the {g.op.name.lower()} value"
            raise ValueError(f"{kernel}: with {vals}, {what} reaches [{lo}, {hi}], outside int32: {target} computes "
                             "index arithmetic in 32 bits; launch it on smaller sizes")


def narrow_check(lk, target: str, why: str = "has no 64-bit integers") -> None:
    """Raise a KernelError unless `lk`'s 64-bit integer arithmetic fits in int32 for every launch its var bounds
    allow (no launch-time guards)."""
    for v in _wide_vars(lk):
        raise KernelError(f"{target} does not support var {v.name!r} with bounds [{v.lo}, {v.hi}]: the target {why} "
                          f"and index arithmetic is narrowed to int32; declare the var with hi <= {I32_MAX}")
    bad = wide_values(list(lk.uops))
    if bad:
        w = bad[0]
        raise KernelError(f"{target} does not support 64-bit integer values: {w.describe()}, outside int32 (the "
                          f"target {why}; index arithmetic narrows to int32 only where the bounds prove it fits: "
                          f"smaller var bounds or buffer sizes, or int32 data, make it fit)", w.uop)
