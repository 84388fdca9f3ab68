"""The verifier: every malformed kernel is refused here with a KernelError naming the node and its source line."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .dtypes import dtypes
from .ops import ALU, Ops
from .order import check_load_order, stmt_index
from .typing import alu_dtype
from .uop import KernelError, UOp, sym_eval

if TYPE_CHECKING:
    from .builder import Kernel


def free_ranges(nodes: list[UOp]) -> dict[UOp, frozenset[UOp]]:
    """For each node, the ranges its value depends on (a REDUCE binds the ranges it reduces)."""
    free: dict[UOp, frozenset[UOp]] = {}
    for u in nodes:
        s = frozenset().union(*(free[x] for x in u.src)) if u.src else frozenset()
        if u.op is Ops.RANGE:
            s = s | {u}
        elif u.op is Ops.REDUCE:  # a triangular range's bounds keep the outer ranges, even of a folded value
            s = free[u.src[0]].union(*(free[r] for r in u.src[1:])) - set(u.src[1:])
        free[u] = s
    return free


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
    found = None
    for x in u.toposort():
        if x not in memo:
            memo[x] = x if x.op is Ops.SCALAR else next((memo[y] for y in x.src if memo[y] is not None), None)
    found = memo[u]
    return found


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
    _check_bounds(k, nodes)
    check_load_order(k.sink.src, nodes, free)
    _check_races(k, nodes, free)


# ---- out-of-bounds analysis -------------------------------------------------------------------------------------------

def _var_samples(k: Kernel) -> list[dict[str, int]]:
    return _samples_of(k.vars)


def _index_vars(vars_) -> list:
    """The vars that sizes, indices and bounds may use: not the scalars (they are values only)."""
    return [v for v in vars_ if v.scalar is None]


def _rel_bounds(v, env: dict[str, int]) -> tuple[int, int]:
    """A var's bounds for the earlier vars' values in env: its box, narrowed by bounds that name other vars."""
    lo = v.lo if v.lo_rel is None else max(v.lo, sym_eval(v.lo_rel, env))
    hi = v.hi if v.hi_rel is None else min(v.hi, sym_eval(v.hi_rel, env))
    return lo, hi


def _samples_of(vars_) -> list[dict[str, int]]:
    """Var values to test bounds at: every combination of lo, lo + 1 and hi (up to 4 vars; else all-lo and
    all-hi), a var whose bounds name earlier vars taking them for those vars' values (none where it has none)."""
    vs = _index_vars(vars_)
    if not vs:
        return [{}]
    if len(vs) > 4:
        out = []
        for pick in (0, 1):
            env: dict[str, int] = {}
            for v in vs:
                lo, hi = _rel_bounds(v, env)
                env[v.name] = (lo, hi)[pick] if lo <= hi else v.lo
            out.append(env)
        return out
    envs: list[dict[str, int]] = [{}]
    for v in vs:
        envs = [{**env, v.name: x} for env in envs for lo, hi in [_rel_bounds(v, env)] if lo <= hi
                for x in sorted({lo, hi, min(hi, lo + 1)})]
    return envs


def _check_bounds(k: Kernel, nodes: list[UOp]) -> None:
    indexes = [u for u in nodes if u.op is Ops.INDEX and len(u.src) == 2]
    if not indexes:
        return
    for env in _var_samples(k):
        memo: dict[UOp, tuple | None] = {}
        for ix in indexes:
            buf = ix.src[0]
            size = sym_eval(buf.src[0], env) if buf.op is Ops.PARAM else buf.arg[1]
            iv = _interval(ix.src[1], env, memo)
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


def is_triangular(r: UOp) -> bool:
    """A RANGE with a start, or whose end uses other ranges (`k.range(i + 1, n)`, `k.range(i + 1, kind="reduce")`)."""
    return r.op is Ops.RANGE and (len(r.src) == 2 or any(x.op is Ops.RANGE for x in r.src[0].toposort()))


def check_dimensions(dims: list[tuple], vars_) -> None:
    """Each ungated component of a shaped access (`A[i, j]`, builder records (param, dimension, component,
    extent, gated)) that provably leaves its dimension is refused, also when the flat index stays in the buffer
    (A[0, n] is A[1, 0]). What cannot be proven is checked at run time against the whole buffer (docs/ir.md)."""
    for env in _samples_of(vars_):
        memo: dict = {}
        for name, k, comp, dim, gated in dims:
            iv = None if gated else _interval(comp, env, memo)
            if iv is None:
                continue
            ext = sym_eval(dim, env)
            if (side := _outside(iv, ext)) == "below":
                raise KernelError(f"index {k} into {name} can be negative (min {iv[0]}){_where(env)}", comp)
            if side == "above":
                raise KernelError(f"index {k} into {name} reaches {iv[1]}, dimension {k} has {ext}{_where(env)}", comp)


# ---- in-bounds proof (which accesses need a run-time check, ir/bounds.py) ------------------------------------------

_AFFINE = {Ops.CONST, Ops.VAR, Ops.RANGE, Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CAST}
_MAX_PERIOD, _MAX_SAMPLES = 64, 4096


def _vertex_safe(u: UOp, memo: dict, periods: dict[str, int]) -> frozenset[str] | None:
    """The vars `u` depends on (through range ends too) when its interval bounds are extremal at the vertices of the
    var box, else None: sums, products of operands over disjoint vars, max only of var-free values, and division or
    modulo by a positive constant d of a value over at most one var v. The last is affine in q for v = d*q + s, so
    `periods[v]` collects d: the samples then take both ends of every residue class of v."""
    if u in memo:
        return memo[u]
    r: frozenset[str] | None = None
    deps = [_vertex_safe(s, memo, periods) for s in u.src]
    if u.op in _AFFINE and all(d is not None for d in deps) and (u.op is not Ops.CAST or u.src[0].dtype.is_int):
        ds: list[frozenset[str]] = deps  # type: ignore[assignment]
        allv = frozenset().union(*ds) if ds else frozenset()
        if u.op is Ops.VAR:
            r = frozenset({u.arg[0]})
        elif u.op in (Ops.CONST, Ops.RANGE, Ops.ADD, Ops.SUB, Ops.CAST):
            r = allv
        elif u.op is Ops.MUL:
            r = allv if not (ds[0] & ds[1]) else None
        elif u.op is Ops.MAX:
            r = allv if not allv else None
        elif u.src[1].op is Ops.CONST and 0 < u.src[1].arg <= _MAX_PERIOD and not ds[1] and len(ds[0]) <= 1:
            for v in ds[0]:
                periods[v] = math.lcm(periods.get(v, 1), u.src[1].arg)
            r = allv if all(p <= _MAX_PERIOD for p in periods.values()) else None
    memo[u] = r
    return r


# symbolic intervals: polynomials over the vars, {monomial: coefficient}, a monomial a sorted tuple of var names
Poly = dict[tuple[str, ...], int]


def _padd(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + sign * c
    return {m: c for m, c in out.items() if c}


def _pmul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb))
            out[m] = out.get(m, 0) + ca * cb
    return {m: c for m, c in out.items() if c}


def _nonneg(p: Poly, lows: dict[str, int]) -> bool:
    """p >= 0 for every var >= its lower bound: with v = lo + t (t >= 0) every coefficient is >= 0."""
    shifted: Poly = {}
    for m, c in p.items():
        term: Poly = {(): c}
        for v in m:
            term = _pmul(term, {(): lows[v], (v,): 1} if lows[v] else {(v,): 1})
        shifted = _padd(shifted, term)
    return all(c >= 0 for c in shifted.values())


def _sym_interval(u: UOp, lows: dict[str, int], memo: dict) -> tuple[Poly, Poly] | None:
    """[lo, hi] of an index as polynomials of the vars valid for every var value (ranges r in [0, end - 1]), or
    None outside sums, differences and products whose signs are known. A var is exact (itself); its bounds are
    applied when the interval is compared with the buffer (_nonneg_rel)."""
    if u in memo:
        return memo[u]
    r: tuple[Poly, Poly] | None = None
    src = [] if u.op in (Ops.RANGE, Ops.VAR) else [_sym_interval(s, lows, memo) for s in u.src]
    if any(x is None for x in src):
        src = None  # type: ignore[assignment]
    elif u.op is Ops.CONST:
        r = ({(): u.arg} if u.arg else {}, {(): u.arg} if u.arg else {})
    elif u.op is Ops.VAR:  # one value per launch: exact; its bounds are used by _nonneg_rel, where they keep the
        own: Poly = {(u.arg[0],): 1}  # correlation (lo + t with t < cnt <= n - lo is at most n - 1)
        r = (own, own)
    elif u.op is Ops.RANGE:  # start <= r <= end - 1 (the extremes of bounds over other ranges: sound, not exact)
        end = _sym_interval(_running_end(u.src[-1]), lows, memo)
        start = ({}, {}) if len(u.src) == 1 else _sym_interval(u.src[0], lows, memo)
        if end is not None and start is not None:
            r = (start[0], _padd(end[1], {(): -1}))
    elif u.op is Ops.CAST and u.src[0].dtype.is_int:
        r = src[0]
    elif u.op is Ops.ADD:
        r = (_padd(src[0][0], src[1][0]), _padd(src[0][1], src[1][1]))
    elif u.op is Ops.SUB:
        r = (_padd(src[0][0], src[1][1], -1), _padd(src[0][1], src[1][0], -1))
    elif u.op is Ops.MUL:
        (a0, a1), (b0, b1) = src
        if _nonneg(a0, lows) and _nonneg(b0, lows):
            r = (_pmul(a0, b0), _pmul(a1, b1))
    memo[u] = r
    return r


def _running_end(end: UOp) -> UOp:
    """A range's end as far as its body is concerned: `max(e, c)` with a constant c <= 0 (the builder's lane range
    `start + k.range(max(end - start, 0))`) runs only when e >= 1, and then it is e."""
    if end.op is Ops.MAX:
        for e, c in (end.src, end.src[::-1]):
            if c.op is Ops.CONST and c.arg <= 0:
                return e
    return end


def _nonneg_rel(p: Poly, lows: dict[str, int], bounds: list[tuple[str, Poly | None, Poly | None]]) -> bool:
    """p >= 0 for every launch, using each var's bounds (latest declared first: a bound names earlier vars only).
    Where p is linear in var v, p = v * q + r with q of known sign, p is smallest at v's lower bound (q >= 0) or at
    its upper bound (q <= 0), so that bound (an expression of earlier vars, or the number) replaces v. What is left
    must be >= 0 for every var at or above its lower number (_nonneg)."""
    if _nonneg(p, lows):
        return True
    for name, lo, hi in reversed(bounds):
        if not any(name in m for m in p):
            continue
        if any(m.count(name) > 1 for m in p):
            continue  # not linear in it
        q: Poly = {tuple(x for x in m if x != name): c for m, c in p.items() if name in m}
        rest: Poly = {m: c for m, c in p.items() if name not in m}
        if _nonneg(q, lows):
            sub = lo
        elif _nonneg({m: -c for m, c in q.items()}, lows):
            sub = hi
        else:
            continue
        if sub is None:
            continue
        p = _padd(rest, _pmul(q, sub))
        if _nonneg(p, lows):
            return True
    return _nonneg(p, lows)


def _proven_symbolically(ix: UOp, lows: dict[str, int], memo: dict,
                         bounds: list[tuple[str, Poly | None, Poly | None]] | None = None) -> bool:
    iv, size = _sym_interval(ix.src[1], lows, memo), _sym_interval(ix.src[0].src[0], lows, {})
    if iv is None or size is None or size[0] != size[1]:
        return False
    bounds = bounds or []
    return _nonneg_rel(iv[0], lows, bounds) and _nonneg_rel(_padd(_padd(size[1], {(): -1}), iv[1], -1), lows, bounds)


def _var_bound_polys(vars_) -> list[tuple[str, Poly | None, Poly | None]]:
    """(name, lower bound, upper bound) of each var as polynomials, in declaration order: its relational bound
    (an expression of earlier vars) where it has one and it is a polynomial, else its number."""
    out = []
    for v in vars_:
        polys = []
        for rel, num in ((getattr(v, "lo_rel", None), v.lo), (getattr(v, "hi_rel", None), v.hi)):
            iv = None if rel is None else _sym_interval(rel, {}, {})
            polys.append(iv[0] if iv is not None and iv[0] == iv[1] else
                         ({(): int(num)} if num else {}) if isinstance(num, int) and abs(num) < 2**62 else None)
        out.append((v.name, *polys))
    return out


def _proof_samples(vars_, periods: dict[str, int]) -> list[dict[str, int]] | None:
    """Every vertex of the var box, each var also at both ends of each residue class of its period (a var whose
    bounds name earlier vars: the vertices of its bounds for their values)."""
    envs: list[dict[str, int]] = [{}]
    for v in _index_vars(vars_):
        nxt = []
        for env in envs:
            vlo, vhi = _rel_bounds(v, env)
            if vlo > vhi:
                continue
            c = {vlo, vhi, min(vhi, vlo + 1)}
            p = periods.get(v.name, 1)
            if p > 1:
                for s in range(p):
                    lo = vlo + (s - vlo) % p
                    hi = vhi - (vhi - s) % p
                    c.update(x for x in (lo, hi) if vlo <= x <= vhi)
            nxt += [{**env, v.name: x} for x in sorted(c)]
            if len(nxt) > _MAX_SAMPLES:
                return None
        envs = nxt
    return envs


def unproven_indexes(nodes: list[UOp], vars_) -> list[UOp]:
    """INDEX nodes into params that the bounds proof cannot keep inside [0, size) for every launch: a data-dependent
    index (it reads a LOAD), an index or size outside the fragment of `_vertex_safe`, too many samples, or an
    interval that reaches past the buffer at some sample without exactly doing so (the verifier refused the exact
    ones). A gate does not count as a proof (the reference checks gated lanes too)."""
    safe: dict = {}
    periods: dict[str, int] = {}
    indexes = [u for u in nodes if u.op is Ops.INDEX and u.src[0].op is Ops.PARAM]
    ok = {ix for ix in indexes if _vertex_safe(ix.src[1], safe, periods) is not None
          and _vertex_safe(ix.src[0].src[0], safe, periods) is not None}
    samples = _proof_samples(vars_, periods) if ok else []
    lows, sym = {v.name: int(v.lo) for v in _index_vars(vars_)}, {}
    bounds = _var_bound_polys(_index_vars(vars_))
    out: list[UOp] = []
    memos: list[dict] = [{} for _ in samples or ()]
    for ix in indexes:
        if _proven_symbolically(ix, lows, sym, bounds):
            continue
        if ix not in ok or samples is None:
            out.append(ix)
            continue
        for env, memo in zip(samples, memos):
            iv = _interval(ix.src[1], env, memo)
            if iv is not None and (iv[0] < 0 or iv[1] >= sym_eval(ix.src[0].src[0], env)):
                out.append(ix)
                break
    return out


def _interval(u: UOp, env: dict[str, int], memo: dict) -> tuple | None:
    """(lo, hi, exact, ranges) of an index expression for concrete var values; exact: the bounds are attained."""
    if u in memo:
        return memo[u]
    INF = float("inf")
    r: tuple | None
    src = []
    for s in u.src if u.op is not Ops.RANGE else ():
        x = _interval(s, env, memo)
        if x is None:
            memo[u] = None
            return None
        src.append(x)
    if u.op is Ops.CONST:
        r = (u.arg, u.arg, True, frozenset())
    elif u.op is Ops.VAR:
        r = (env[u.arg[0]], env[u.arg[0]], True, frozenset())
    elif u.op is Ops.RANGE and not is_triangular(u):
        end = sym_eval(u.src[-1], env)
        r = None if end <= 0 else (0, end - 1, True, frozenset({u}))
    elif u.op is Ops.RANGE:  # a start, or bounds over other ranges (triangular): the extremes, not exact
        b = [_interval(x, env, memo) for x in u.src]
        if any(x is None for x in b):
            r = None
        else:
            lo, hi = (0 if len(b) == 1 else b[0][0]), b[-1][1] - 1
            r = None if hi < lo else (lo, hi, False, frozenset({u}).union(*(x[3] for x in b)))
    elif u.op in (Ops.ADD, Ops.SUB):
        (a0, a1, ae, ar), (b0, b1, be, br) = src
        lo, hi = (a0 + b0, a1 + b1) if u.op is Ops.ADD else (a0 - b1, a1 - b0)
        r = (lo, hi, ae and be and not (ar & br), ar | br)
    elif u.op is Ops.MUL:
        (a0, a1, ae, ar), (b0, b1, be, br) = src
        c = [x * y for x in (a0, a1) for y in (b0, b1)]
        exact = (ae and b0 == b1 and not br) or (be and a0 == a1 and not ar)
        r = (min(c), max(c), exact, ar | br)
    elif u.op is Ops.IDIV and src[1][0] == src[1][1] and src[1][0] > 0:
        a0, a1, ae, ar = src[0]
        d = src[1][0]
        r = (int(a0 / d), int(a1 / d), ae, ar)
    elif u.op is Ops.MOD and src[1][0] == src[1][1] and src[1][0] > 0 and src[0][0] >= 0:
        a0, a1, ae, ar = src[0]
        d = src[1][0]
        r = (a0, a1, ae, ar) if a1 < d else (0, d - 1, False, ar)
    elif u.op is Ops.CAST and u.src[0].dtype.is_int:
        r = src[0]
    else:
        ranges = frozenset().union(*(s[3] for s in src)) if src else frozenset()
        r = (-INF, INF, False, ranges)
    memo[u] = r
    return r


# ---- races between lanes -----------------------------------------------------------------------------------------

def affine(u: UOp, memo: dict) -> dict | None:
    """An index as {term: coefficient} with terms RANGE/VAR nodes and 1 for the constant; None if not affine."""
    if u in memo:
        return memo[u]
    r: dict | None = None
    if u.op is Ops.CONST and isinstance(u.arg, int):
        r = {1: u.arg}
    elif u.op in (Ops.RANGE, Ops.VAR):
        r = {u: 1}
    elif u.op is Ops.CAST and u.src[0].dtype.is_int:
        r = affine(u.src[0], memo)
    elif u.op in (Ops.ADD, Ops.SUB):
        a, b = affine(u.src[0], memo), affine(u.src[1], memo)
        if a is not None and b is not None:
            sign = 1 if u.op is Ops.ADD else -1
            r = dict(a)
            for t, c in b.items():
                r[t] = r.get(t, 0) + sign * c
    elif u.op is Ops.MUL:
        a, b = affine(u.src[0], memo), affine(u.src[1], memo)
        if a is not None and b is not None:
            if set(a) == {1}:
                a, b = b, a
            if set(b) == {1}:
                r = {t: c * b[1] for t, c in a.items()}
    memo[u] = None if r is None else {t: c for t, c in r.items() if c}
    return memo[u]


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
