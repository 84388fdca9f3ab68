"""The analyses of kernel graphs that the verifier, the bounds checks, the optimizer and the reference share: free
ranges, intervals of index expressions (concrete and symbolic), the in-bounds proof and affine forms.

Each is a memoised function of a hash-consed node computed sources first over an explicit order (`uop.memo_order`),
never by recursion: a user's expression may be nested as deep as it likes (a 100,000-step chain).
"""

from __future__ import annotations

import math

from .ops import Ops
from .uop import UOp, memo_order, sym_eval

_NONE: frozenset[UOp] = frozenset()


def free_ranges(nodes: list[UOp]) -> dict[UOp, frozenset[UOp]]:
    """For each node, the ranges its value depends on (a REDUCE binds the ranges it reduces)."""
    free: dict[UOp, frozenset[UOp]] = {}
    for u in nodes:
        if not (src := u.src):
            s = _NONE
        else:  # a source's set itself where the others add nothing (most nodes): no new set per node
            s = free[src[0]]
            for x in src[1:]:
                if (f := free[x]) is not s and not f <= s:
                    s = s | f
        if u.op is Ops.RANGE:
            s = s | {u}
        elif u.op is Ops.REDUCE:  # a triangular range's bounds keep the outer ranges, even of a folded value
            s = free[u.src[0]].union(*(free[r] for r in u.src[1:])) - set(u.src[1:])
        free[u] = s
    return free


def _index_vars(vars_) -> list:
    """The vars that sizes, indices and bounds may use: not the scalars (they are values only)."""
    return [v for v in vars_ if v.scalar is None]


def _rel_bounds(v, env: dict[str, int]) -> tuple[int, int]:
    """A var's bounds for the earlier vars' values in env: its box, narrowed by bounds that name other vars."""
    lo = v.lo if v.lo_rel is None else max(v.lo, sym_eval(v.lo_rel, env))
    hi = v.hi if v.hi_rel is None else min(v.hi, sym_eval(v.hi_rel, env))
    return lo, hi


def samples_of(vars_) -> list[dict[str, int]]:
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


def is_triangular(r: UOp) -> bool:
    """A RANGE with a start, or whose end uses other ranges (`k.range(i + 1, n)`, `k.range(i + 1, kind="reduce")`)."""
    return r.op is Ops.RANGE and (len(r.src) == 2 or any(x.op is Ops.RANGE for x in r.src[0].toposort()))


# ---- in-bounds proof (which accesses need a run-time check, ir/bounds.py) ------------------------------------------

_AFFINE = {Ops.CONST, Ops.VAR, Ops.RANGE, Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CAST}
_MAX_PERIOD, _MAX_SAMPLES = 64, 4096


def _vertex_safe(u: UOp, memo: dict, periods: dict[str, int]) -> frozenset[str] | None:
    """The vars `u` depends on (through range ends too) when its interval bounds are extremal at the vertices of the
    var box, else None: sums, products of operands over disjoint vars, max only of var-free values, and division or
    modulo by a positive constant d of a value over at most one var v. The last is affine in q for v = d*q + s, so
    `periods[v]` collects d: the samples then take both ends of every residue class of v."""
    for x in memo_order(u, memo):
        memo[x] = _vertex_safe1(x, [memo[s] for s in x.src], periods)
    return memo[u]


def _vertex_safe1(u: UOp, deps: list, periods: dict[str, int]) -> frozenset[str] | None:
    r: frozenset[str] | None = None
    if u.op in _AFFINE and all(d is not None for d in deps) and (u.op is not Ops.CAST or u.src[0].dtype.is_int):
        ds: list[frozenset[str]] = deps
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


def sym_interval(u: UOp, lows: dict[str, int], memo: dict) -> tuple[Poly, Poly] | None:
    """[lo, hi] of an index as polynomials of the vars valid for every var value (ranges r in [0, end - 1]), or
    None outside sums, differences and products whose signs are known. A var is exact (itself); its bounds are
    applied when the interval is compared with the buffer (_nonneg_rel)."""
    for x in memo_order(u, memo, leaf=lambda y: y.op in (Ops.RANGE, Ops.VAR)):
        memo[x] = _sym_interval1(x, lows, memo)
    return memo[u]


def _sym_interval1(u: UOp, lows: dict[str, int], memo: dict) -> tuple[Poly, Poly] | None:
    r: tuple[Poly, Poly] | None = None
    src = [] if u.op in (Ops.RANGE, Ops.VAR) else [memo[s] for s in u.src]
    if any(x is None for x in src):
        return None
    if u.op is Ops.CONST:
        r = ({(): u.arg} if u.arg else {}, {(): u.arg} if u.arg else {})
    elif u.op is Ops.VAR:  # one value per launch: exact; its bounds are used by _nonneg_rel, where they keep the
        own: Poly = {(u.arg[0],): 1}  # correlation (lo + t with t < cnt <= n - lo is at most n - 1)
        r = (own, own)
    elif u.op is Ops.RANGE:  # start <= r <= end - 1 (the extremes of bounds over other ranges: sound, not exact)
        end = sym_interval(_running_end(u.src[-1]), lows, memo)
        start = ({}, {}) if len(u.src) == 1 else sym_interval(u.src[0], lows, memo)
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
    iv, size = sym_interval(ix.src[1], lows, memo), sym_interval(ix.src[0].src[0], lows, {})
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
            iv = None if rel is None else sym_interval(rel, {}, {})
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
    sizes: list[dict] = [{} for _ in samples or ()]  # per sample: a param's size (asked once per index)
    for ix in indexes:
        if _proven_symbolically(ix, lows, sym, bounds):
            continue
        if ix not in ok or samples is None:
            out.append(ix)
            continue
        size = ix.src[0].src[0]
        for env, memo, known in zip(samples, memos, sizes):
            iv = interval(ix.src[1], env, memo)
            if iv is None:
                continue
            if (n := known.get(size)) is None:
                n = known[size] = sym_eval(size, env)
            if iv[0] < 0 or iv[1] >= n:
                out.append(ix)
                break
    return out


def interval(u: UOp, env: dict[str, int], memo: dict) -> tuple | None:
    """(lo, hi, exact, ranges) of an index expression for concrete var values; exact: the bounds are attained."""
    for x in memo_order(u, memo, leaf=lambda y: y.op is Ops.RANGE):
        memo[x] = _interval1(x, env, memo)
    return memo[u]


def _interval1(u: UOp, env: dict[str, int], memo: dict) -> tuple | None:
    INF = float("inf")
    r: tuple | None
    src = [] if u.op is Ops.RANGE else [memo[s] for s in u.src]
    if any(x is None for x in src):
        return None
    if u.op is Ops.CONST:
        r = (u.arg, u.arg, True, frozenset())
    elif u.op is Ops.VAR:
        r = (env[u.arg[0]], env[u.arg[0]], True, frozenset())
    elif u.op is Ops.RANGE and not is_triangular(u):
        end = sym_eval(u.src[-1], env)
        r = None if end <= 0 else (0, end - 1, True, frozenset({u}))
    elif u.op is Ops.RANGE:  # a start, or bounds over other ranges (triangular): the extremes, not exact
        b = [interval(x, env, memo) for x in u.src]
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
    return r


# ---- affine forms (races between lanes, the reference's loop order) ----------------------------------------------

_AFFINE_OPS = (Ops.CAST, Ops.ADD, Ops.SUB, Ops.MUL)


def _affine_leaf(u: UOp) -> bool:
    return u.op not in _AFFINE_OPS or (u.op is Ops.CAST and not u.src[0].dtype.is_int)


def affine(u: UOp, memo: dict) -> dict | None:
    """An index as {term: coefficient} with terms RANGE/VAR nodes and 1 for the constant; None if not affine."""
    for x in memo_order(u, memo, leaf=_affine_leaf):
        r = _affine1(x, memo)
        memo[x] = None if r is None else {t: c for t, c in r.items() if c}
    return memo[u]


def _affine1(u: UOp, memo: dict) -> dict | None:
    r: dict | None = None
    if u.op is Ops.CONST and isinstance(u.arg, int):
        r = {1: u.arg}
    elif u.op in (Ops.RANGE, Ops.VAR):
        r = {u: 1}
    elif u.op is Ops.CAST and u.src[0].dtype.is_int:
        r = memo[u.src[0]]
    elif u.op in (Ops.ADD, Ops.SUB):
        a, b = memo[u.src[0]], memo[u.src[1]]
        if a is not None and b is not None:
            sign = 1 if u.op is Ops.ADD else -1
            r = dict(a)
            for t, c in b.items():
                r[t] = r.get(t, 0) + sign * c
    elif u.op is Ops.MUL:
        a, b = memo[u.src[0]], memo[u.src[1]]
        if a is not None and b is not None:
            if set(a) == {1}:
                a, b = b, a
            if set(b) == {1}:
                r = {t: c * b[1] for t, c in a.items()}
    return r
