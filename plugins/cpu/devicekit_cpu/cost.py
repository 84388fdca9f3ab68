"""Estimate the work of one iteration of the split range, so tiny launches stay on one thread."""

from __future__ import annotations

from devicekit.ir.ops import ALU, Ops
from devicekit.ir.rewrite import substitute
from devicekit.ir.uop import _SYM_ALU, SymInt, UOp

_COUNTED = ALU | {Ops.LOAD, Ops.STORE, Ops.CAST, Ops.BITCAST}
_UNKNOWN = 16  # trip count assumed for a range whose extent is not a function of the vars


def _extent(r: UOp) -> SymInt:
    start, end = r.src
    if start.op is Ops.CONST and end.op is Ops.CONST:
        return max(0, end.arg - start.arg)
    e = end if start.op is Ops.CONST and start.arg == 0 else end - start
    for _ in range(8):  # bounds over enclosing loops (a K block's `min(lo + size, k) - lo`): those loops at their start
        inner = {u: u.src[0] for u in e.toposort() if u.op is Ops.RANGE}
        if not inner:
            break
        e = substitute(e, inner)
    if all(u.op in (Ops.CONST, Ops.VAR) or u.op in _SYM_ALU for u in e.toposort()):
        return e
    return _UNKNOWN


def split_cost(lk) -> SymInt:
    """Counted ops per iteration of the split (outermost) range, inner loops multiplied out and the loops around it
    too (each thread runs them: a packed tile's K blocks and column tiles, ir/pack.py): an int, or an expression over
    the kernel's vars. A kernel without a split range is one iteration: its whole work (the runtime
    uses it to tell a launch that may run long, see CPUProgram.may_run_long)."""
    whole = lk.core_split is None
    const = 0
    terms: dict[UOp, int] = {}  # symbolic trip-count product -> how many ops run that often
    stack: list[SymInt] = [1] if whole else []
    outer: list[SymInt] = [1]  # loops around the split range (a packed tile's K blocks and column tiles) multiply it
    inside = whole
    for u in lk.uops:
        if u.op is Ops.RANGE:
            if not inside:
                if u.src[0].op is Ops.VAR and u.src[0].arg[0] == "core_start":
                    inside = True
                    stack = [outer[-1]]
                else:
                    outer.append(outer[-1] * _extent(u))
                continue
            stack.append(stack[-1] * _extent(u))
        elif u.op is Ops.ENDRANGE and inside:
            stack.pop()
            if not stack:
                inside = False
        elif u.op is Ops.ENDRANGE and len(outer) > 1:
            outer.pop()
        elif inside and u.op in _COUNTED:
            if isinstance(stack[-1], int):
                const += stack[-1]
            else:
                terms[stack[-1]] = terms.get(stack[-1], 0) + 1
    total: SymInt = const
    for e, k in terms.items():
        total = e * k + total
    return total
