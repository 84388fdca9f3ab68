"""32-bit index arithmetic by proof: may a lowered kernel's 64-bit integer values be computed in 32 bits?

devicekit's index arithmetic (ranges, GPU indices, vars, address math) is int64. A backend without 64-bit integers
(WGSL) must compute it in int32, and one with them (CUDA, OpenCL, Metal) runs faster when it does: int32 multiply
and compare are single instructions on every GPU. Narrowing is exact when every int64 value the kernel computes lies
in int32 (FIT = [-(2**31) + 1, 2**31 - 1] where the sentinel below is used): then no int64 op wrapped and none of the int32 ops that replace them can wrap
either (each result is the same integer), so the kernel computes the same values.

One value outside FIT is allowed: INT64_MIN, the sentinel of the bounds-check record (`ir.bounds`: "no failure yet",
max-reduced with failing indices). It is rendered as int32's minimum, which no other value takes (FIT leaves it out),
so the map is an order isomorphism: max, where, <, == and != give the same answers, and a store maps it back. The
sentinel may flow only through those ops (and accumulators); arithmetic on it is refused.

The proof reads the bounds the IR already has (`ir.typing.value_bounds`: ranges end at their extents, vars at their
declared `hi`, GPU indices at their launch extents, arithmetic by interval rules); accumulators (DEFINE_ACC/ASSIGN)
get the hull of what is assigned to them, to a fixpoint. A value whose bounds are unknown (an int64 loaded from
memory, an accumulator that keeps growing, a cast from float) does not fit: `narrow_plan` refuses it with a
KernelError naming it, worded "does not support" so that the fuzzer counts it as a documented limit of the target,
not a finding. A value whose fit depends on the vars' values (`n * m` with both declared up to 2**31 - 1) becomes a
guard that `launch_check` proves again at each launch, with the vars pinned to that launch's values.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import DataRangeError
from .dtypes import DType, dtypes
from .ops import Ops
from .rewrite import substitute
from .typing import value_bounds
from .uop import KernelError, UOp

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
FIT_LO, FIT_HI = I32_MIN + 1, I32_MAX  # I32_MIN is the sentinel's image
SENTINEL = -(2**63)
# ops whose dtype is not a value computed by the kernel (memory handles, statements)
_NOT_VALUES = frozenset({Ops.PARAM, Ops.DEFINE_LOCAL, Ops.INDEX, Ops.STORE, Ops.BARRIER, Ops.ENDRANGE, Ops.IF,
                         Ops.ENDIF})
_WIDE = (dtypes.int64, dtypes.uint64)
_ORDER_OPS = frozenset({Ops.MAX, Ops.CMPLT, Ops.CMPEQ, Ops.CMPNE, Ops.ASSIGN, Ops.DEFINE_ACC})
_ROUNDS = 16  # accumulator fixpoint: more rounds than this and the accumulator is unbounded


def is_wide(dt: DType) -> bool:
    """Whether dt (or its scalar) is a 64-bit integer dtype."""
    return dt.scalar() in _WIDE


@dataclass(frozen=True)
class Abs:
    """What a 64-bit value may be: the bounds of its non-sentinel values (None: only the sentinel) and whether it
    may be the sentinel."""

    lo: int | float | None
    hi: int | float | None
    sentinel: bool = False

    def join(self, o: Abs) -> Abs:
        if self.lo is None:
            return Abs(o.lo, o.hi, self.sentinel or o.sentinel)
        if o.lo is None:
            return Abs(self.lo, self.hi, self.sentinel or o.sentinel)
        return Abs(min(self.lo, o.lo), max(self.hi, o.hi), self.sentinel or o.sentinel)


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


def checked_cast(u: UOp, fit_lo: int) -> bool:
    """A 32-bit integer widened to 64 bits whose bounds leave [fit_lo, FIT_HI] (int32 data that may hold int32's
    minimum, the sentinel's image; uint32 data past 2**31 - 1: a gather's index buffer). A backend that checks
    what it loads (`loads`) checks these values too, at run time, as it checks an int64 it loads."""
    if u.op is not Ops.CAST or not is_wide(u.dtype) or u.src[0].dtype.scalar() not in (dtypes.int32, dtypes.uint32):
        return False
    lo, hi = value_bounds(u)
    return not (fit_lo <= lo and hi <= FIT_HI)


def _dependent(uops: list[UOp], loads: bool = False) -> set[UOp]:
    """Values that read an accumulator, the sentinel or (`loads`) a checked int64 load or widened 32-bit value
    (`checked_cast`): value_bounds cannot bound them; `_abstract` does."""
    dep: set[UOp] = set()
    fit_lo = FIT_LO if has_sentinel(uops) else I32_MIN
    for u in uops:
        if u.op in (Ops.DEFINE_ACC, Ops.ASSIGN) or (u.op is Ops.CONST and u.arg == SENTINEL and is_wide(u.dtype)) \
                or (loads and (u.op is Ops.LOAD and is_wide(u.dtype) or checked_cast(u, fit_lo))) \
                or any(s in dep for s in u.src):
            dep.add(u)
    return dep


def _abstract(uops: list[UOp], dep: set[UOp], loads: bool = False) -> tuple[dict[UOp, Abs], list[tuple[UOp, UOp]]]:
    """Abs of every dependent 64-bit value (accumulators to a fixpoint), and the (user, value) pairs where a value
    that may be the sentinel reaches an op that is not order-preserving."""
    full = Abs(-float("inf"), float("inf"))
    acc: dict[UOp, Abs] = {}
    out: dict[UOp, Abs] = {}
    fit_lo = FIT_LO if has_sentinel(uops) else I32_MIN

    def get(s: UOp) -> Abs:
        if s in dep:
            return out.get(s, full)
        lo, hi = value_bounds(s)
        return Abs(lo, hi)

    for rnd in range(_ROUNDS + 1):
        changed = False
        for u in uops:
            if u not in dep or not is_wide(u.dtype) or u.op in _NOT_VALUES:
                continue
            op, src = u.op, u.src
            if op is Ops.CONST:
                a = Abs(None, None, True)
            elif op is Ops.LOAD or (loads and checked_cast(u, fit_lo)):  # checked (`loads`): the backend verifies
                a = Abs(FIT_LO, FIT_HI)  # each value fits, at run time
            elif op is Ops.DEFINE_ACC:
                a = acc.setdefault(u, get(src[0]))
            elif op is Ops.ASSIGN:
                a = get(src[1])
                new = acc.get(src[0], a).join(a)
                if rnd == _ROUNDS and new != acc.get(src[0]):
                    new = full.join(Abs(None, None, new.sentinel))  # still growing: unbounded
                if new != acc.get(src[0]):
                    acc[src[0]], changed = new, True
            elif op is Ops.MAX:
                x, y = get(src[0]), get(src[1])
                parts = [] if x.lo is None or y.lo is None else [Abs(max(x.lo, y.lo), max(x.hi, y.hi))]
                parts += [y] * x.sentinel + [x] * y.sentinel
                a = Abs(None, None, x.sentinel and y.sentinel)
                for p in parts:
                    a = a.join(Abs(p.lo, p.hi))
            elif op is Ops.WHERE:
                a = get(src[1]).join(get(src[2]))
            elif op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG) and all(is_wide(s.dtype) for s in src):
                xs = [get(s) for s in src]
                if any(x.sentinel or x.lo is None for x in xs):
                    a = full
                elif op is Ops.ADD:
                    a = Abs(xs[0].lo + xs[1].lo, xs[0].hi + xs[1].hi)
                elif op is Ops.SUB:
                    a = Abs(xs[0].lo - xs[1].hi, xs[0].hi - xs[1].lo)
                elif op is Ops.NEG:
                    a = Abs(-xs[0].hi, -xs[0].lo)
                else:
                    c = [p * q for p in (xs[0].lo, xs[0].hi) for q in (xs[1].lo, xs[1].hi)]
                    a = Abs(min(c), max(c))
            elif op is Ops.CAST and not is_wide(src[0].dtype) and src[0].dtype.scalar() == dtypes.bool:
                a = Abs(0, 1)
            else:
                a = full
            out[u] = a
        if not changed:
            break
    misuse = []
    for u in uops:
        for k, s in enumerate(u.src):
            if s in out and out[s].sentinel and not (
                    u.op in _ORDER_OPS or (u.op is Ops.WHERE and k > 0) or (u.op is Ops.STORE and k == 1)):
                misuse.append((u, s))
    return out, misuse


def has_sentinel(uops: list[UOp]) -> bool:
    """Whether the kernel uses INT64_MIN (the bounds-check record's sentinel): then int32's minimum is its image and
    no other value may take it (FIT); otherwise every int32 value fits."""
    return any(u.op is Ops.CONST and u.arg == SENTINEL and is_wide(u.dtype) for u in uops)


def wide_values(uops: list[UOp], loads: bool = False) -> list[Wide]:
    """Every 64-bit integer value of the linear form `uops` (values used only for launch dims excepted:
    `launch_only`) whose non-sentinel values the bounds do not place inside FIT, in order. `loads`: int64 loads are
    checked at run time by the backend (each value fits in FIT, or the launch fails), so they count as fitting."""
    out: list[Wide] = []
    skip = launch_only(uops)
    dep = _dependent(uops, loads)
    fit_lo = FIT_LO if has_sentinel(uops) else I32_MIN
    abst, _ = _abstract(uops, dep, loads) if dep else ({}, [])
    for u in uops:
        if u.op in _NOT_VALUES or not is_wide(u.dtype) or u in skip:
            continue
        if u in dep:
            a = abst.get(u, Abs(-float("inf"), float("inf")))
            lo, hi = (a.lo, a.hi) if a.lo is not None else (FIT_LO, FIT_LO)
        else:
            lo, hi = value_bounds(u)
        if not (fit_lo <= lo and hi <= FIT_HI):
            out.append(Wide(u, lo, hi))
    return out


def _wide_vars(lk) -> list:
    return [v for v in lk.vars if v.scalar is None and not (FIT_LO <= v.lo and v.hi <= FIT_HI)]


def fits_32(lk) -> bool:
    """Whether every 64-bit integer value of the lowered kernel `lk` is proven to fit in int32 for every launch the
    var bounds allow (narrowing is exact with no launch-time check)."""
    uops = list(lk.uops)
    return not wide_values(uops) and not _wide_vars(lk) and not _abstract(uops, _dependent(uops))[1]


def narrow_plan(lk, target: str, why: str = "has no 64-bit integers", loads: bool = False) -> tuple[UOp, ...]:
    """Narrow `lk`'s 64-bit integer arithmetic to int32, by proof (see the module doc): a KernelError ("does not
    support", naming the value) for a value no var bounds can place in int32, else the guards `launch_check`
    proves at each launch (an empty tuple: it fits for every launch, `fits_32`). `target` names the backend in the
    message ("WEBGPU"); `why` says why it must narrow. `loads`: the backend checks every int64 it loads at run time
    (the value is in FIT, or the launch fails naming it), and every 32-bit integer it widens past FIT
    (`checked_cast`), so a loaded index counts as FIT; arithmetic on it must still be proven."""
    uops = list(lk.uops)
    dep = _dependent(uops, loads)
    _, misuse = _abstract(uops, dep, loads) if dep else ({}, [])
    for user, v in misuse:
        raise KernelError(f"{target} does not support 64-bit integer values: INT64_MIN (the bounds-check sentinel) "
                          f"reaches {user.op.name.lower()}, which int32 cannot compute exactly (the target {why})",
                          user)
    guards: list[UOp] = []
    for w in wide_values(uops, loads):
        d = w.uop.dtype.scalar()
        no_var = not any(x.op is Ops.VAR for x in w.uop.toposort())
        if w.uop in dep or no_var or w.lo <= d.min() or w.hi >= d.max():  # no var value can bound it
            raise KernelError(f"{target} does not support 64-bit integer values: {w.describe()}, outside int32 (the "
                              f"target {why}; index arithmetic narrows to int32 only where the bounds prove it "
                              "fits: int32 data or bounded vars make it fit)", w.uop)
        guards.append(w.uop)
    for v in _wide_vars(lk):  # the var itself travels as int32
        guards.append(UOp(Ops.VAR, dtypes.int64, (), (v.name, v.lo, v.hi)))
    return tuple(guards)


def launch_check(guards: tuple[UOp, ...], var_vals: dict, target: str, kernel: str, fit_lo: int = FIT_LO) -> None:
    """Prove again, with the vars pinned to this launch's values, that every guard of `narrow_plan` fits in int32
    (from `fit_lo`: I32_MIN where the kernel has no sentinel, `has_sentinel`); a DataRangeError (a LaunchError, a ValueError) naming the value and the
    vars otherwise (nothing ran). Callers memoize by values."""
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
        if not (fit_lo <= lo and hi <= FIT_HI):
            vals = ", ".join(f"{u.arg[0]}={int(var_vals[u.arg[0]])}" for u in pins)
            what = f"var {g.arg[0]!r}" if g.op is Ops.VAR else f"the {g.op.name.lower()} value"
            raise DataRangeError(f"{kernel}: with {vals}, {what} reaches [{lo}, {hi}], outside int32: {target} computes "
                             "index arithmetic in 32 bits; launch it on smaller sizes")


def narrow_check(lk, target: str, why: str = "has no 64-bit integers") -> None:
    """Raise a KernelError unless `lk`'s 64-bit integer arithmetic fits in int32 for every launch its var bounds
    allow (no launch-time guards)."""
    if guards := narrow_plan(lk, target, why):
        g = guards[0]
        if g.op is Ops.VAR:
            raise KernelError(f"{target} does not support var {g.arg[0]!r} with bounds [{g.arg[1]}, {g.arg[2]}]: the "
                              f"target {why} and index arithmetic is narrowed to int32; declare it with hi <= "
                              f"{FIT_HI}")
        lo, hi = value_bounds(g)
        raise KernelError(f"{target} does not support 64-bit integer values: {Wide(g, lo, hi).describe()}, outside "
                          f"int32 for some launches the var bounds allow (the target {why})", g)


def _i32(dt: DType) -> DType:
    return dtypes.int32 if dt.count == 1 else dtypes.int32.vec(dt.count)


def narrowed(lk):
    """`lk` with its int64 values computed in int32, for a backend that has int64 but runs int32 index arithmetic
    faster (OpenCL, CUDA, Metal on a GPU); None where that is not proven exact for every launch its var bounds allow
    (`fits_32`: no launch-time guards), or where the kernel uses the bounds-check sentinel, shifts an int64 by an
    amount not proven to be in [0, 31] (int32 masks it to 5 bits), or bitcasts an int64. Memory keeps its dtypes:
    an int64 buffer is stored an int32 value (C converts it exactly) and is never loaded (a loaded int64 is not
    bounded, so `fits_32` fails). Vars and GPU indices keep their int64 wire type and are cast to int32 where
    read; values that only size the launch (`launch_only`) are left as they were."""
    from dataclasses import replace

    uops = list(lk.uops)
    if has_sentinel(uops) or not fits_32(lk):
        return None
    skip = launch_only(uops)
    m: dict[UOp, UOp] = {}
    inserted: dict[UOp, UOp] = {}
    out: list[UOp] = []
    for u in uops:
        if u in inserted:  # the kernel's own cast of a var or index to int32: the one inserted after it
            m[u] = inserted[u]
            continue
        dt = u.dtype
        if u.op is Ops.BITCAST and (is_wide(dt) or is_wide(u.src[0].dtype)):
            return None
        retype = u.op not in _NOT_VALUES and dt.scalar() == dtypes.int64 and u not in skip
        if retype and u.op in (Ops.SHL, Ops.SHR):
            lo, hi = value_bounds(u.src[1])
            if not (0 <= lo and hi <= 31):
                return None
        src = tuple(m.get(s, s) for s in u.src)
        if retype and u.op in (Ops.VAR, Ops.SPECIAL):  # the wire/built-in stays int64, read as int32
            nu = u if src == u.src else UOp(u.op, dt, src, u.arg)
            cast = UOp(Ops.CAST, _i32(dt), (nu,))
            m[u] = cast
            inserted[cast] = cast
            out += [nu, cast]
            continue
        nu = UOp(u.op, _i32(dt) if retype else dt, src, u.arg) if retype or src != u.src else u
        m[u] = nu
        out.append(nu)
    return replace(lk, uops=out)
