"""Run-time bounds checks: the one lowering pass that guards every access the verifier cannot prove in bounds.

An unproven access (`verify.unproven_indexes`: a data-dependent index, a gate, an index outside the provable
fragment) gets its gate ANDed with `0 <= idx < size`, so a failing lane touches no memory (a load reads its default,
a store does nothing), and the kernel records the failure in a hidden int64 "error" buffer the pass adds as its
last param: for check site k, element 2k is set to 1 and element 2k+1 to the offending index. `Program.execute`
allocates that buffer (zeroed), passes it after the user's buffers and raises `bounds_error` after the launch.
Every renderer gets this through `linearize.lower`: it is ordinary gated loads and stores of an ordinary param.

The scheduler (`linearize`) keeps each record in a register, a running maximum over the loops, and stores it once at
the end of the kernel when it saw a failure: a conditional store to one address in every iteration would keep loops
from vectorizing. Which index is reported when several lanes fail: the largest failing index of each CPU chunk or
GPU thread; the final stores are plain (no atomics), so across chunks or threads whichever stored last. Only
global params are checked; local (shared) arrays are not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import names
from .analysis import free_ranges, unproven_indexes
from .dtypes import dtypes
from .ops import Ops
from .uop import UOp, make_alu

if TYPE_CHECKING:
    from .builder import Kernel

ERROR_PARAM = names.BOUNDS_PARAM  # the hidden param's name (reserved: KernelBuilder refuses it)
UNCHECKED = "unchecked"  # INDEX arg of an access the user opted out of checking (`load(..., unchecked=True)`)
_INT64_MIN = -(2**63)


@dataclass(frozen=True)
class BoundsChecks:
    """What a launch needs to report a failed check: the hidden buffer's slot (= the number of user params) and,
    per check site, the slot and name of the param it guards."""

    kernel: str
    slot: int
    sites: tuple[tuple[int, str], ...]

    @property
    def size(self) -> int:
        return 2 * len(self.sites)

    def error(self, record: Any, sizes: list[int], var_vals: dict[str, Any]) -> IndexError | None:
        """The IndexError of the first failed site in the hidden buffer's contents `record` (int64s), or None."""
        for k, (slot, name) in enumerate(self.sites):
            if record[2 * k]:
                return bounds_error(self.kernel, name, int(record[2 * k + 1]), sizes[slot], var_vals)
        return None


def bounds_error(kernel: str, name: str, index: int, size: int, var_vals: dict[str, Any]) -> IndexError:
    """The one message every device gives (the reference interpreter uses it too)."""
    return IndexError(f"kernel {kernel}: access to {name}[{index}] is out of bounds (size {size})"
                      f"{' for ' + str(var_vals) if var_vals else ''}")


def guard_accesses(kernel: Kernel, sink: UOp) -> tuple[UOp, UOp | None, BoundsChecks | None]:
    """Gate every unproven access of `sink` (the kernel's graph, orderings stripped) and add the error records.
    Returns the new sink, the hidden PARAM (None when nothing needs a check) and the checks for the ProgramSpec."""
    nodes = sink.toposort()
    targets = [ix for ix in unproven_indexes(nodes, kernel.vars) if ix.arg != UNCHECKED] if kernel.checked else []
    if not targets:
        return _strip_unchecked(sink), None, None
    site = {ix: k for k, ix in enumerate(targets)}
    err = UOp(Ops.PARAM, dtypes.int64, (UOp.const(dtypes.index, 2 * len(targets)),),
              (len(kernel.param_uops), ERROR_PARAM, True))
    free = free_ranges(nodes)
    stmts: list[UOp] = []
    for st in sink.src:
        stmts.append(st)
        if st.op is not Ops.STORE:
            continue
        inside = set(st.toposort())
        for ix in targets:
            if ix in inside:
                stmts += _records(ix, site[ix], err, frozenset(free[ix]) - free[st], st.arg)
    return _gate(sink.replace(src=tuple(stmts)), site), err, \
        BoundsChecks(kernel.name, len(kernel.param_uops), tuple((ix.src[0].arg[0], ix.src[0].arg[1]) for ix in targets))


def is_record(st: UOp) -> bool:
    """Whether a statement is one of the record stores this pass adds (arg ("bounds", statement, site, slot))."""
    return isinstance(st.arg, tuple) and st.arg[0] == "bounds"


def _in_bounds(ix: UOp) -> UOp:
    idx, size = ix.src[1], ix.src[0].src[0]
    return make_alu(Ops.AND, (make_alu(Ops.CMPLT, (UOp.const(dtypes.index, -1), idx)), make_alu(Ops.CMPLT, (idx, size))))


def _fails(ix: UOp) -> UOp:
    bad = make_alu(Ops.CMPNE, (_in_bounds(ix), UOp.const(dtypes.bool, True)))
    return bad if len(ix.src) == 2 else make_alu(Ops.AND, (ix.src[2], bad))


def _records(ix: UOp, k: int, err: UOp, bound: frozenset[UOp], tag: Any) -> list[UOp]:
    """The two stores that record site k's failure; inside a reduction (ranges `bound`) the failures are reduced
    first, so the record is written once per lane of the enclosing statement."""
    fail, idx = _fails(ix), ix.src[1]
    if bound:
        ranges = tuple(sorted(bound, key=lambda r: r.arg[0]))
        flag = UOp(Ops.REDUCE, dtypes.int64, (UOp(Ops.CAST, dtypes.int64, (fail,)), *ranges), Ops.MAX)
        idx = UOp(Ops.REDUCE, dtypes.int64,
                  (make_alu(Ops.WHERE, (fail, idx, UOp.const(dtypes.int64, _INT64_MIN))), *ranges), Ops.MAX)
        fail = make_alu(Ops.CMPLT, (UOp.const(dtypes.int64, 0), flag))
    one = UOp.const(dtypes.int64, 1)
    at = [UOp(Ops.INDEX, dtypes.int64, (err, UOp.const(dtypes.index, 2 * k + j), fail)) for j in (0, 1)]
    return [UOp(Ops.STORE, dtypes.void, (at[0], one), ("bounds", tag, k, 0)),
            UOp(Ops.STORE, dtypes.void, (at[1], idx), ("bounds", tag, k, 1))]


def _gate(sink: UOp, site: dict[UOp, int]) -> UOp:
    """One bottom-up pass: each guarded INDEX gets `gate & in_bounds`; an ungated load of it gets default 0."""
    memo: dict[UOp, UOp] = {}
    for u in sink.toposort():
        src = tuple(memo[s] for s in u.src)
        if u in site:
            ok = _in_bounds(u.replace(src=src))
            gate = ok if len(src) == 2 else make_alu(Ops.AND, (src[2], ok))
            nu = UOp(Ops.INDEX, u.dtype, (src[0], src[1], gate))
        elif u.op is Ops.INDEX and u.arg == UNCHECKED:
            nu = UOp(Ops.INDEX, u.dtype, src)
        elif u.op is Ops.LOAD and u.src[0] in site and len(u.src) == 1:
            nu = UOp(Ops.LOAD, u.dtype, (src[0], UOp.const(u.dtype, 0)), u.arg)
        else:
            nu = u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=src)
        memo[u] = nu
    return memo[sink]


def _strip_unchecked(sink: UOp) -> UOp:
    return _gate(sink, {}) if any(u.op is Ops.INDEX and u.arg == UNCHECKED for u in sink.toposort()) else sink
