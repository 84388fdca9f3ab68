"""Program order: where each statement runs in the loop nest and where a load of a buffer the kernel writes is read.

The rules (docs/ir.md, "Memory order") are the same on every device, so this module computes them once for the
verifier, the reference interpreter and the tests; the scheduler in `linearize` places loads by the same rules on
the lowered graph.

- A statement's loops are its `global`, `local` and `loop` ranges in canonical order (kind, then creation).
  Consecutive statements share the loops of their common prefix (one loop body); a barrier closes the loops the
  statements around it do not share. The `unroll` lanes of one statement are like vector lanes: all of its loads
  happen before its stores.
- A load of a writable param or of a local array (`k.local`: the same rules) carries its build point as its arg: `("after", s, k)`, s the statement index of the
  param's last store before it (-1: none), k the number of statements built before it. It is read at k: before
  statement k, inside the loops statement k shares with statement k - 1 (the loops open where it was built) and
  inside those of statement k's loops its index needs, once per iteration of them. Later uses in the same loop
  body see that value; a use outside that body after a store to the param is refused at build (the value would
  have to outlive the loop it was read in), as is a load whose index needs a range statement k does not run in
  (a reduce range) when its param is stored between the build point and its first use. A load of a local array
  built right before a barrier is read before that barrier (its barrier epoch), unless its index needs a range a
  reduction runs over (then the rule above).
"""

from __future__ import annotations

from .ops import Ops
from .uop import KernelError, UOp

_KIND_RANK = {"global": 0, "local": 1, "loop": 2}


def stmt_index(st: UOp) -> int:
    """The builder's statement number: unroll expansion keeps it as the first item of a tuple arg, a bounds-check
    record (ir/bounds.py) as the second, after "bounds"."""
    a = st.arg
    while isinstance(a, tuple):
        a = a[1] if a[0] == "bounds" else a[0]
    return a


def is_ordered_load(u: UOp) -> bool:
    return u.op is Ops.LOAD and isinstance(u.arg, tuple) and u.arg[0] == "after"


def build_position(stmts: tuple[UOp, ...], k: int) -> int:
    """The position of the statement a load built at k is read before (the first one numbered k or later)."""
    return next((n for n, st in enumerate(stmts) if stmt_index(st) >= k), len(stmts))


def nest(ranges: frozenset) -> tuple[UOp, ...]:
    """The loops a statement runs in, outermost first (reduce and unroll ranges are not loops of the statement)."""
    rs = [r for r in ranges if r.op is Ops.RANGE and r.arg[1] in _KIND_RANK]
    return tuple(sorted(rs, key=lambda r: (_KIND_RANK[r.arg[1]], r.arg[0])))


def block_paths(stmts: tuple[UOp, ...], free: dict[UOp, frozenset]) -> list[tuple[int, ...]]:
    """For each statement, the ids of the loop bodies it runs in, outermost first: two statements share the body at
    depth d exactly when their paths agree up to d. Mirrors the scheduler (a loop stays open while consecutive
    statements share it; a barrier closes what the statements around it do not share)."""
    ids = iter(range(1 << 62))
    stack: list[tuple[UOp, int]] = []
    paths: list[tuple[int, ...]] = []
    for n, st in enumerate(stmts):
        if st.op is Ops.BARRIER:
            nxt = nest(free[stmts[n + 1]]) if n + 1 < len(stmts) and stmts[n + 1].op is not Ops.BARRIER else ()
        else:
            nxt = nest(free[st])
        k = 0
        while k < min(len(stack), len(nxt)) and stack[k][0] is nxt[k]:
            k += 1
        del stack[k:]
        if st.op is not Ops.BARRIER:
            stack.extend((r, next(ids)) for r in nxt[k:])
        paths.append(tuple(b for _, b in stack))
    return paths


def read_depth(load: UOp, stmt_nest: tuple[UOp, ...], free: frozenset) -> int | None:
    """The loop depth at which a load built before a statement is read: inside all of that statement's loops
    (None: its index needs a range the statement does not run in, so it is read at each use instead)."""
    if any(r.op is Ops.RANGE and r not in stmt_nest for r in free):
        return None
    return len(stmt_nest)


def check_load_order(stmts: tuple[UOp, ...], nodes: list[UOp], free: dict[UOp, frozenset]) -> None:
    """Refuse a load whose value would have to outlive the loop body it is read in (see the module docstring)."""
    loads = [u for u in nodes if is_ordered_load(u)]
    if not loads:
        return
    paths = block_paths(stmts, free)
    reduced = {r for u in nodes if u.op is Ops.REDUCE for r in u.src[1:]}
    stores: dict[UOp, list[int]] = {}
    for n, st in enumerate(stmts):
        if st.op is Ops.STORE:
            stores.setdefault(st.src[0].src[0], []).append(n)
    users: dict[UOp, list[int]] = {}
    want = set(loads)
    for n, st in enumerate(stmts):
        if st.op is Ops.STORE:
            for u in st.toposort():
                if u in want:
                    users.setdefault(u, []).append(n)
    for load in loads:
        us, k = users.get(load, []), build_position(stmts, load.arg[2])
        buf = load.src[0].src[0]
        writes = stores.get(buf, [])
        if not us or not writes or k >= len(stmts):
            continue
        rd = read_depth(load, nest(free[stmts[k]]), free[load]) if stmts[k].op is Ops.STORE else None
        if rd is None and stmts[k].op is Ops.BARRIER and buf.op is Ops.DEFINE_LOCAL and not free[load] & reduced:
            continue  # a local load built right before a barrier is read before it, in its barrier epoch
        if rd is None:
            first = us[0]
            if any(k <= w < first for w in writes):
                _refuse(load, buf, "its index needs a range the statement after it does not run in")
            rd, k = len(paths[first]), first
        body = paths[k][:rd]
        for m in us:
            if paths[m][:rd] != body and any(w < m for w in writes):
                _refuse(load, buf, "it is used outside the loop body it is read in, after a store to it")


def _refuse(load: UOp, buf: UOp, why: str) -> None:
    name = buf.arg[1] if buf.op is Ops.PARAM else buf.arg[0]  # a local array's arg is (name, size)
    raise KernelError(f"a load from {name} cannot keep its value: {why}; load {name} again where the value is "
                      "used (docs/ir.md, Memory order)", load)


__all__ = ["block_paths", "build_position", "check_load_order", "is_ordered_load", "nest", "read_depth", "stmt_index"]
