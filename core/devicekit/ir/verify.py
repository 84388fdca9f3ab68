"""The verifier: every malformed kernel is refused here with a KernelError naming the node and its source line.

The analyses it runs (free ranges, intervals, affine forms, the in-bounds proof) live in ir/analysis.py; the names
other modules imported from here are re-exported."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .analysis import affine, free_ranges, interval, is_triangular, samples_of, unproven_indexes
from .dtypes import dtypes
from .ops import ALU, Ops
from .order import check_load_order, stmt_index
from .typing import alu_dtype
from .uop import KernelError, UOp, memo_order, sym_eval

if TYPE_CHECKING:
    from .builder import Kernel


def scalar_use(u: UOp, use: str, memo: dict | None = None) -> None:
    """KernelError naming the k.scalar that `u` depends on, if any, and the use (`as a range's end`, `in the size of
    param A`): a scalar is a per-launch value for expressions; sizes, indices and bounds are vars (bounded, proven)."""
    s = _scalar_in(u, {} if memo is None else memo)
    if s is None:
        return
    hint = (f"; an int that {'is an index' if 'index' in use else 'sizes or bounds something'} is a var: "
            f"k.var({s.arg!r}, lo, hi), checked against its bounds at launch" if s.dtype.is_int else "")
    raise KernelError(f"scalar {s.arg} ({s.dtype.name}) used {use}: a k.scalar is a value for expressions, never a "
                      f"size, index or range bound{hint}", s)


def _scalar_in(u: UOp, memo: dict) -> UOp | None:
    """The first SCALAR node `u` depends on, or None."""
    if u in memo:
        return memo[u]
    for x in memo_order(u, memo):
        memo[x] = x if x.op is Ops.SCALAR else next((memo[y] for y in x.src if memo[y] is not None), None)
    return memo[u]


def _check_scalar_uses(k: Kernel, nodes: list[UOp]) -> None:
    memo: dict = {}
    for u in nodes:
        if u.op is Ops.INDEX:
            buf = u.src[0]
            scalar_use(u.src[1], f"in an index into {buf.arg[1] if buf.op is Ops.PARAM else buf.arg[0]}", memo)
        elif u.op is Ops.RANGE:
            for what, b in zip(("start", "end") if len(u.src) == 2 else ("end",), u.src):
                scalar_use(b, f"as a range's {what}", memo)
        elif u.op is Ops.PARAM and u.src:
            scalar_use(u.src[0], f"in the size of param {u.arg[1]}", memo)
    for v in k.vars:
        for what, r in (("lo", v.lo_rel), ("hi", v.hi_rel)):
            if isinstance(r, UOp):
                scalar_use(r, f"in the {what} bound of var {v.name}", memo)


def verify(k: Kernel) -> None:
    from .structure import check_structure
    nodes = k.sink.toposort()
    check_structure(k, nodes)
    _check_scalar_uses(k, nodes)
    params, vars_ = set(k.param_uops), set(k.var_uops)
    free = free_ranges(nodes)
    reduced_by: dict[UOp, list[UOp]] = {}
    for u in nodes:
        if u.op in ALU:
            want = alu_dtype(u.op, u.src)
            if want != u.dtype:
                raise KernelError(f"{u.op.name} should have dtype {want}, has {u.dtype}", u)
        elif u.op is Ops.PARAM and u not in params:
            raise KernelError(f"param {u.arg[1]} belongs to another kernel", u)
        elif u.op is Ops.VAR and u not in vars_:
            raise KernelError(f"var {u.arg[0]} belongs to another kernel", u)
        elif u.op is Ops.SCALAR and u not in vars_:
            raise KernelError(f"scalar {u.arg} belongs to another kernel", u)
        elif u.op is Ops.INDEX:
            if u.src[0].op not in (Ops.PARAM, Ops.DEFINE_LOCAL):
                raise KernelError("only params and local arrays can be indexed", u)
            if not u.src[1].dtype.is_int or u.src[1].dtype.count != 1:
                raise KernelError(f"index must be a scalar integer, got {u.src[1].dtype}", u.src[1])
        elif u.op is Ops.STORE:
            buf = u.src[0].src[0]
            if buf.op is Ops.PARAM and not buf.arg[2]:
                raise KernelError(f"store to read-only param {buf.arg[1]}", u)
            if u.src[1].dtype != buf.dtype:
                raise KernelError(f"store of {u.src[1].dtype} into {buf.dtype} buffer", u)
        elif u.op is Ops.CAST or u.op is Ops.BITCAST:
            if u.src[0].dtype.count != u.dtype.count:
                raise KernelError(f"{u.op.name} changes the number of lanes", u)
        elif u.op is Ops.REDUCE:
            if u.arg not in (Ops.ADD, Ops.MAX, Ops.MUL):
                raise KernelError(f"reduce op must be ADD, MAX or MUL, got {u.arg}", u)
            if u.dtype.scalar() == dtypes.bool:
                raise KernelError("reduce over bool values: cast to an integer type first", u)
            for r in u.src[1:]:
                if r.op is not Ops.RANGE:
                    raise KernelError("reduce over something that is not a range", u)
                if r not in free[u.src[0]]:
                    raise KernelError(f"reduce over range {r.arg[0]} that its expression does not use", u)
                if r.arg[1] in ("global", "local"):
                    raise KernelError(f"reduce over a {r.arg[1]} range: use kind='reduce' (or loop/unroll)", r)
                for other in reduced_by.get(r, ()):
                    if other in u.src[0].toposort() or u in other.src[0].toposort():
                        raise KernelError(f"range {r.arg[0]} is reduced inside a reduction over itself: build one "
                                          "range per nested reduction", u)
                reduced_by.setdefault(r, []).append(u)
    for st in k.sink.src:
        for r in free[st]:
            if r in reduced_by or r.arg[1] == "reduce":
                what = "is reduced elsewhere" if r in reduced_by else "is a reduce range that no reduction consumes"
                raise KernelError(f"range {r.arg[0]} used outside its scope: it {what}", st)
    _check_nesting(nodes)
    _check_bounds(k, nodes)
    check_load_order(k.sink.src, nodes, free)
    _check_races(k, nodes, free)


MAX_NESTED_REDUCTIONS = 64  # each is a loop (and a level of the scheduler's and reference's walk)


def _check_nesting(nodes: list[UOp]) -> None:
    """Reductions nest at most MAX_NESTED_REDUCTIONS deep: a limit said by name (deeper ones ran into Python's
    recursion limit in lowering and the reference, and no compiler wants 1,000 nested loops). Expressions and
    chains have no limit."""
    depth: dict[UOp, int] = {}
    for u in nodes:
        d = max((depth[s] for s in u.src), default=0) + (u.op is Ops.REDUCE)
        depth[u] = d
        if d > MAX_NESTED_REDUCTIONS:
            raise KernelError(f"reductions nested {d} deep: devicekit lowers at most {MAX_NESTED_REDUCTIONS} nested "
                              "reductions (a reduction inside the expression of another); split the kernel", u)


# ---- out-of-bounds analysis -------------------------------------------------------------------------------------------

def _var_samples(k: Kernel) -> list[dict[str, int]]:
    return samples_of(k.vars)


def _check_bounds(k: Kernel, nodes: list[UOp]) -> None:
    indexes = [u for u in nodes if u.op is Ops.INDEX and len(u.src) == 2]
    if not indexes:
        return
    for env in _var_samples(k):
        memo: dict[UOp, tuple | None] = {}
        for ix in indexes:
            buf = ix.src[0]
            size = sym_eval(buf.src[0], env) if buf.op is Ops.PARAM else buf.arg[1]
            iv = interval(ix.src[1], env, memo)
            if iv is None:
                continue  # an empty range: never executed
            name = buf.arg[1] if buf.op is Ops.PARAM else buf.arg[0]
            if (side := _outside(iv, size)) == "below":
                raise KernelError(f"index into {name} can be negative (min {iv[0]}){_where(env)}", ix)
            if side == "above":
                raise KernelError(f"index into {name} out of bounds: reaches {iv[1]}, size is {size}{_where(env)}", ix)


def _outside(iv: tuple, extent: int) -> str | None:
    """"below" or "above" when an index interval provably leaves [0, extent): an exact bound past the edge, or the
    whole interval beyond it; else None."""
    lo, hi, exact, _ = iv
    if (exact and lo < 0) or hi < 0:
        return "below"
    if (exact and hi >= extent) or lo >= extent:
        return "above"
    return None


def _where(env: dict[str, int]) -> str:
    return f" with {', '.join(f'{a}={b}' for a, b in env.items())}" if env else ""


def check_dimensions(dims: list[tuple], vars_) -> None:
    """Each ungated component of a shaped access (`A[i, j]`, builder records (param, dimension, component,
    extent, gated)) that provably leaves its dimension is refused, also when the flat index stays in the buffer
    (A[0, n] is A[1, 0]). What cannot be proven is checked at run time against the whole buffer (docs/ir.md)."""
    for env in samples_of(vars_):
        memo: dict = {}
        for name, k, comp, dim, gated in dims:
            iv = None if gated else interval(comp, env, memo)
            if iv is None:
                continue
            ext = sym_eval(dim, env)
            if (side := _outside(iv, ext)) == "below":
                raise KernelError(f"index {k} into {name} can be negative (min {iv[0]}){_where(env)}", comp)
            if side == "above":
                raise KernelError(f"index {k} into {name} reaches {iv[1]}, dimension {k} has {ext}{_where(env)}", comp)


# ---- races between lanes -----------------------------------------------------------------------------------------

def _check_races(k: Kernel, nodes: list[UOp], free: dict) -> None:
    """Refuse a read of an element that another lane writes, where the indices prove it: the store's and the load's
    index are affine with the same coefficients except one lane range's constant offset d, and that lane range has
    lanes i and i + d (an ungated store and load; gated ones may be guarded)."""
    stores = [st for st in k.sink.src if st.op is Ops.STORE and len(st.src[0].src) == 2
              and st.src[0].src[0].op is Ops.PARAM]
    if not stores:
        return
    memo: dict = {}
    loads = [u for u in nodes if u.op is Ops.LOAD and len(u.src[0].src) == 2 and u.src[0].src[0].op is Ops.PARAM]
    for st in stores:
        buf, sidx = st.src[0].src[0], st.src[0].src[1]
        sa = affine(sidx, memo)
        if sa is None:
            continue
        for ld in loads:
            if ld.src[0].src[0] is not buf or ld.src[0] is st.src[0]:
                continue
            la = affine(ld.src[0].src[1], memo)
            if la is None or {t for t in sa if t != 1} != {t for t in la if t != 1}:
                continue
            diff = {t: sa.get(t, 0) - la.get(t, 0) for t in set(sa) | set(la)}
            if any(c for t, c in diff.items() if t != 1) or not diff.get(1):
                continue
            d = diff[1]
            for r, c in sa.items():
                if r == 1 or r.op is not Ops.RANGE or r.arg[1] not in ("global", "local") or d % c:
                    continue
                step, end = abs(d // c), r.src[-1]
                if end.op is Ops.CONST and step >= end.arg:
                    continue
                bufname, off = buf.arg[1], -(d // c)
                raise KernelError(f"race on {bufname}: lane i of {r.arg[1]} range {r.arg[0]} loads the element of "
                                  f"{bufname} that lane i{off:+d} stores (statement {stmt_index(st)}); a lane may only "
                                  "read what it writes itself, or share through local memory and a barrier", ld)


__all__ = ["affine", "check_dimensions", "free_ranges", "is_triangular", "scalar_use", "unproven_indexes", "verify"]
