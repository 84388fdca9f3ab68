"""The heuristic optimizer: register tiles over the global ranges of a reduction kernel, chosen from its indices.

A naive gemm, `c[i, j] = (a[i, r] * b[r, j]).sum(r)`, reads a column of b per output: one multiply-add per two
loads, with a stride of a row between them. Two rewrites of the lanes make it a register tile, the way
`kernels.matmul` is written by hand (tinygrad calls them UPCAST and UNROLL of its hand-coded optimizations):

- **upcast** the global range `j` that every store and every load that uses it indexes with a stride of 1: `tn`
  consecutive lanes become one vector (a vector load of b's row, a vector accumulator, a vector store). Lanes past
  the last multiple of `tn` run in a tail statement: the original statement over a range that starts there, after
  one half-width vector tail (`small_extent_lanes`: a 10-wide axis runs as 8 + 2 lanes, not 10 scalars). A known
  extent caps `tn` at its largest power of two. On the CPU, `j` is the range split across threads only when it is
  the kernel's one global range (a column sum): the vector loop and each tail are then over ranges of their own,
  independent iteration spaces (docs/ir.md) that the split runs once each.
- **unroll** a global range `i` that some load inside a reduction does not depend on (b's row is shared by the `tm`
  rows of the tile): `tm` copies of each statement, lane x at row `min(i' * tm + x, end - 1)` (a valid row, so
  every load stays where the original's was proven or checked) with its stores gated by `i' * tm + x < end`.
  `tm` fills half the register file with vector accumulators; without an upcast axis (scalar rows) it is UNROLL.

Global lanes are independent (docs/ir.md: a lane reads only what it writes), so any assignment of lanes to
threads, vector lanes and copies keeps the result; each lane's statements stay in order. The optimizer runs in
`linearize.lower` for every renderer the core lowers for (not the PYTHON reference: it is the fuzzer's oracle), only
on what it understands: no barriers, local memory or local ranges, no run-time bounds checks, no vector values
written by the user (a hand-tiled kernel is left as written), every statement over the same global ranges, a tiled
range in no other range's bounds. The choice is returned as text and recorded in the ProgramSpec's meta ("opts"),
so `devicekit inspect` shows it and the source (hence every cache key) changes with it. `build(optimize=False)`
opts one kernel out, DEVICEKIT_OPT=0 every kernel.
"""

from __future__ import annotations

from typing import Any

from .. import settings
from .analysis import free_ranges
from .dtypes import dtypes, scalar_wire
from .kblock import block_k, kblock
from .ops import Ops
from .pack import PANELS, packed, worth_packing
from .passes import simplify_step
from .rewrite import substitute_memo
from .uop import UOp, memo_order

# float ALU ops a vector of lanes computes as one vector op; anything else is computed lane by lane
_LIFT = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.MAX, Ops.NEG, Ops.RECIP, Ops.SQRT, Ops.EXP2, Ops.LOG2,
                   Ops.SIN, Ops.TRUNC, Ops.MULACC})
_FLOATS = (dtypes.float32, dtypes.float64)
_CMP = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ})  # float comparisons lift to a vector of bools (a where's mask)
_HALVES = (dtypes.float16, dtypes.bfloat16)
UNROLL = 4  # rows of a register tile
TILE_BYTES = 64  # a tile row: a cache line; two AVX2 vectors, one AVX-512 (4 x 16 float32 beat 4 x 8 by 2.5x at 1024)
KBLOCK = True  # K blocking of 2-D tiles on the CPU (ir/kblock.py)
MIN_TAIL = 4  # the narrowest vector tail of an upcast (16 bytes of float32: the narrowest SIMD register)
applied = 0  # kernels rewritten in this process: the fuzzer counts the kernels it checked the optimizer on


def optimize(sink: UOp, caps: Any, tiles: tuple[int, int] | None = None) -> tuple[UOp, tuple[str, ...]]:
    """The rewritten sink and the optimizations applied (empty: the kernel as written). `tiles` (rows, lanes)
    replaces the heuristic's UNROLL and TILE_BYTES (Kernel.with_tiles: dk.search's candidates)."""
    if not (caps.core_split or caps.gpu_indexing):
        return sink, ()
    nodes = sink.toposort()
    if any(u.op in (Ops.BARRIER, Ops.DEFINE_LOCAL, Ops.SPECIAL) or u.dtype.count > 1
           or (u.op is Ops.RANGE and u.arg[1] == "local") for u in nodes):
        return sink, ()
    if not any(u.op is Ops.REDUCE for u in nodes) or any(st.op is not Ops.STORE for st in sink.src):
        return sink, ()
    if any(isinstance(st.arg, tuple) for st in sink.src):  # run-time bounds records or expanded statements
        return sink, ()
    free = free_ranges(nodes)
    glob = sorted({r for st in sink.src for r in free[st] if r.arg[1] == "global"}, key=lambda r: r.arg[0])
    if not glob or any({r for r in free[st] if r.arg[1] == "global"} != set(glob) for st in sink.src):
        return sink, ()
    bounded = {r for u in nodes if u.op is Ops.RANGE for s in u.src for r in free[s]}  # triangular: leave alone
    ordered = any(u.op is Ops.LOAD and isinstance(u.arg, tuple) and u.arg[0] == "after" for u in nodes)
    if ordered and len(sink.src) > 1:
        return sink, ()
    memo: dict = {}
    loads = [u for u in nodes if u.op is Ops.LOAD]
    in_reduce = {x for u in nodes if u.op is Ops.REDUCE for x in u.src[0].toposort()}
    red_loads = [u for u in loads if u in in_reduce]
    opts: list[str] = []
    # the vector axis: stride 1 in every store and every load that uses it, used inside a reduction
    vec = None
    if caps.core_split and caps.vectors:
        # not the range split across threads, unless it is the only one (see the module's docstring): a column sum
        # over 256 x 512 float32, one thread, 112 -> 14 us
        lone = not glob[1:] and not ordered and all(u.op is not Ops.RANGE or u is glob[0] or (
            u.arg[1] == "reduce" and len(u.src) == 1) for u in nodes)  # no loop range, no triangle, nothing in place
        for g in reversed(glob[1:] or (glob if lone else [])):
            if g in bounded or not any(g in free[u] for u in red_loads):
                continue
            if all(_stride(st.src[0].src[1], g, memo, free) == 1 for st in sink.src) and \
                    all(_stride(u.src[0].src[1], g, memo, free) == 1 or _gathered(u, g, glob, red_loads, free)
                        for u in loads if g in free[u]):
                vec = g
                break
    # the unrolled axis: another global range a load inside a reduction does not use (that load is shared)
    unr = next((h for h in glob if h is not vec and h not in bounded and any(
        h not in free[u] and any(r.arg[1] == "reduce" for r in free[u]) for u in red_loads)), None)
    if vec is None and unr is None:
        return sink, ()
    next_id = 1 + max(u.arg[0] for u in nodes if u.op is Ops.RANGE)
    stmts = list(sink.src)
    # rows: a vector row's accumulators fill half the register file; scalar rows (no vector axis) stay at UNROLL
    rows = (heuristic_rows(caps) if vec is not None else UNROLL) if tiles is None else tiles[0]
    if unr is not None and tiles is None and unr.src[0].op is Ops.CONST:
        rows = min(rows, unr.src[0].arg)  # no copies past a known end
    # simplify's first step taken as the tiles are built, where the graph allows it (`_Tidy`)
    tidy = _Tidy(vec) if not any((u.op is Ops.SCALAR and scalar_wire(u.dtype) != u.dtype)
                                 or u.dtype.scalar() in _HALVES or (u.op is Ops.RANGE and u.arg[1] == "unroll")
                                 for u in nodes) else _keep
    # the vector axis's dtype: 64 bytes of it a vector (16 float32, 8 float64)
    dt = next((u.dtype for u in red_loads if vec in free[u]), dtypes.float32) if vec is not None else dtypes.float32
    lanes = max(1, min(16, TILE_BYTES // dt.itemsize))
    if tiles is None and vec is not None and unr is not None and caps.core_split and caps.pack_tiles and \
            len(stmts) == 1 and set(glob) == {unr, vec} and settings.get("DEVICEKIT_OPT_PACK"):
        vrb = getattr(caps, "vector_register_bytes", 0) or 0
        panels = PANELS if tile_rows(vrb, TILE_BYTES * PANELS) >= 4 * PANELS else 1
        prow = tile_rows(vrb, TILE_BYTES * panels)
        if worth_packing(unr.src[0], vec.src[0], prow, lanes * panels) and (done := packed(
                stmts[0], unr, vec, free, nodes, lanes, prow, panels, next_id,
                _Tidy(None, tidy.clean) if tidy is not _keep else _keep)) is not None:
            _count_applied()
            return sink.replace(src=tuple(done[0])), (done[1],)
    if unr is not None and rows > 1:
        stmts = _unroll(stmts, unr, rows, tidy)
        opts.append(f"unroll global range {unr.arg[0]} x{rows}")
    if vec is not None:
        width = lanes if tiles is None else tiles[1]
        tails: tuple[int, ...] = ()
        if tiles is None:
            width, tails = small_extent_lanes(width, vec.src[0].arg if vec.src[0].op is Ops.CONST else None)
        if width > 1:
            stmts = _upcast(stmts, vec, width, next_id, tails, tidy=_Tidy(None, tidy.clean) if tidy is not _keep
                            else _keep)
            opts.append(f"upcast global range {vec.arg[0]} x{width}")
            if tails:
                opts.append("vector tails " + " ".join(f"x{t}" for t in tails))
            if caps.core_split and unr is not None and rows > 1 and glob == [unr, vec] and KBLOCK:
                kc = block_k(rows, width, dt.itemsize)
                ranges = [u for u in UOp(Ops.SINK, dtypes.void, tuple(stmts)).toposort() if u.op is Ops.RANGE]
                jr = next(u for u in ranges if u.arg == vec.arg)  # one walk of the shared graph, not one a statement
                ids = 1 + max(u.arg[0] for u in ranges)
                if (blocked := kblock(stmts, jr, kc, ids)) is not None:
                    stmts = blocked
                    opts.append(f"k blocks of {kc}")
    if not opts:
        return sink, ()
    _count_applied()
    return sink.replace(src=tuple(stmts)), tuple(opts)


def _count_applied() -> None:
    """One more kernel rewritten in this process (the fuzzer's count, `applied`)."""
    global applied
    applied += 1


def _gathered(u: UOp, g: UOp, glob: list[UOp], red_loads: list[UOp], free: dict[UOp, frozenset]) -> bool:
    """A load of the vector axis `g` without unit stride (b read transposed: `dz @ w2^T`) is gathered lane by lane,
    once per k step for the whole tile: inside the reduction, and independent of another global range, whose rows
    the unroll makes share it (16 scalar loads feed 16 vector multiply-adds). `fw_back` (b^T, a mask), one thread:
    100x64x10 15 -> 8 us, 256x512x10 226 -> 51-54 us against 4 scalar rows (docs/decisions.md)."""
    return u in red_loads and any(h is not g and h not in free[u] for h in glob)


def heuristic_rows(caps: Any) -> int:
    """Rows of the register tile: `tile_rows` of a TILE_BYTES vector per row (a naive 1024^3 float32 gemm on a
    Rocket Lake Xeon: 31 ms with 4 rows, 21 with 8, 18 with 16)."""
    return tile_rows(getattr(caps, "vector_register_bytes", 0) or 0, TILE_BYTES)


def tile_rows(vector_register_bytes: int, row_bytes: int) -> int:
    """Rows of a register tile whose accumulators (`row_bytes` each) fill half the SIMD register file: 4 on AVX2,
    16 on AVX-512 for a 64-byte row; UNROLL (4) at least, and when the file's size is unknown (0); 16 at most. The
    one rule for the optimizer's tiles and kernels.matmul's."""
    return max(UNROLL, min(16, vector_register_bytes // 2 // max(1, row_bytes)))


def small_extent_lanes(width: int, end: int | None) -> tuple[int, tuple[int, ...]]:
    """Lanes of the upcast and of its vector tail for a vector axis of `end` lanes (None: a var). A known end caps
    the lanes at its largest power of two (no vector wider than the axis: 10 lanes run as 8, not as a tail of 16
    scalars), and its remainder gets a half-width vector tail when it holds one; an unknown end always gets that
    half-width tail (run at most once per row), so a short axis (a 10-class layer) runs as 8 + 2 lanes instead of
    10 scalar lanes after an empty x16 loop. One halving only: each tail level is another copy of the whole tile,
    and a second (x4) level made LLVM's code for a 16-row tile 3x slower at 100x10x64 (docs/decisions.md)."""
    half = width // 2
    if end is not None:
        width = min(width, 1 << max(0, end.bit_length() - 1))
        half = width // 2
        return width, (half,) if half >= MIN_TAIL and end % width >= half else ()
    return width, (half,) if half >= MIN_TAIL else ()


def _stride(idx: UOp, r: UOp, memo: dict, free: dict[UOp, frozenset]) -> int | None:
    """The constant step of `idx` per step of range `r` (0: independent of it); None when that step is not constant
    (r under a product with a var, a division, a min ...). Terms without r may be anything. `free`: the nodes' free
    ranges (a global range is never reduced away, so `r in free[u]` is "u depends on r")."""
    m = memo.setdefault(r, {})

    def leaf(u: UOp) -> bool:
        return u is r or r not in free[u] or u.op not in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.CAST)

    for u in memo_order(idx, m, leaf):
        m[u] = _stride1(u, r, m, free)
    return m[idx]


def _stride1(idx: UOp, r: UOp, m: dict, free: dict[UOp, frozenset]) -> int | None:
    if idx is r:
        return 1
    if r not in free[idx]:
        return 0
    if idx.op in (Ops.ADD, Ops.SUB):
        a, b = m[idx.src[0]], m[idx.src[1]]
        return None if a is None or b is None else a + b if idx.op is Ops.ADD else a - b
    if idx.op is Ops.MUL:
        a, b = idx.src
        if b.op is Ops.CONST and isinstance(b.arg, int):
            a, b = b, a
        return None if a.op is not Ops.CONST or not isinstance(a.arg, int) or m[b] is None else a.arg * m[b]
    if idx.op is Ops.CAST and idx.src[0].dtype.is_int:
        return m[idx.src[0]]
    return None


def _gate(st: UOp, cond: UOp) -> UOp:
    """The store, done only where `cond` holds (and its own gate, if it has one)."""
    ix = st.src[0]
    gate = cond if len(ix.src) < 3 else ix.src[2] & cond
    return st.replace(src=(ix.replace(src=(ix.src[0], ix.src[1], gate)), *st.src[1:]))


def _unroll(stmts: list[UOp], h: UOp, tm: int, tidy: _Tidy) -> list[UOp]:
    """Each statement `tm` times, lane x at row min(h' * tm + x, end - 1), stored where h' * tm + x < end."""
    end = h.src[0]
    exact = end.op is Ops.CONST and end.arg % tm == 0
    outer = tidy.expr(UOp(Ops.RANGE, dtypes.index, (_div(end, tm) if exact else _div(end + (tm - 1), tm),), h.arg))
    out = []
    rows: list[dict[UOp, UOp]] = [{} for _ in range(tm)]  # per row: what the statements share is rewritten once
    lanes = [tidy.expr(outer * tm + x) for x in range(tm)]
    at = [lanes[x] if exact else tidy.expr(lanes[x].minimum(tidy.expr(end - 1))) for x in range(tm)]
    gates = [None if exact else tidy.expr(lanes[x] < end) for x in range(tm)]
    for st in stmts:
        for x in range(tm):
            s = st.replace(arg=(st.arg, x))
            row = substitute_memo(s, {h: at[x]}, rows[x], tidy)
            out.append(row if exact else _gate(row, gates[x]))
    return out


def _upcast(stmts: list[UOp], g: UOp, tn: int, tail_id: int, tails: tuple[int, ...] = (),
            lo: UOp | None = None, tidy: _Tidy | None = None) -> list[UOp]:
    """Lanes lo + g' * tn + c (c < tn) of each statement as one vector (lo: 0, or where the previous, wider,
    vectors stopped); the lanes past the last multiple of tn in tail statements over a range that starts there,
    upcast again to each width of `tails` in turn before the last, scalar, tail. Each lane is `first + c`, a
    constant offset from the vector's first lane, so the lowering groups its loads into one vector load."""
    tidy = tidy or _keep
    end = g.src[0]
    count = end if lo is None else tidy.expr(end - lo)
    exact = count.op is Ops.CONST and count.arg % tn == 0
    outer = tidy.expr(UOp(Ops.RANGE, dtypes.index, (_div(count, tn),), g.arg if lo is None else (tail_id, "global")))
    if lo is not None:
        tail_id += 1
    first = tidy.expr(outer * tn if lo is None else lo + outer * tn)
    lanes = [tidy.expr(first + c) for c in range(tn)]
    main: list[UOp] = []
    dep: dict[UOp, bool] = {}
    memo: dict[UOp, UOp] = {}  # shared: the rows of an unrolled tile read the same lanes of b (built once)
    subs: list[dict[UOp, UOp]] = [{} for _ in lanes]  # per lane: the substitution's memo, shared alike
    for st in stmts:
        main += _vector_statement(st.replace(arg=(st.arg, tn)) if lo is not None else st, g, lanes, dep, memo, subs,
                                  tidy)
    if exact:
        return main
    start = tidy.expr(_div(count, tn) * tn if lo is None else lo + _div(count, tn) * tn)
    if tails:
        return main + _upcast(stmts, g, tails[0], tail_id, tails[1:], start, tidy)
    tail = tidy.expr(UOp(Ops.RANGE, dtypes.index, (end - start,), (tail_id, "global")))
    at_tail: dict[UOp, UOp] = {}
    lane = tidy.expr(start + tail)
    return main + [substitute_memo(st, {g: lane}, at_tail, tidy).replace(arg=(st.arg, tn)) for st in stmts]


def _vector_statement(st: UOp, g: UOp, lanes: list[UOp], dep: dict[UOp, bool], memo: dict[UOp, UOp],
                      subs: list[dict[UOp, UOp]], tidy: _Tidy) -> list[UOp]:
    """The statement's `len(lanes)` stores, their values computed as one vector where the ops allow. `dep` (does a
    node depend on g), `memo` (a node's lanes) and `subs` (per lane: a node with g replaced by it) are properties of
    the nodes, shared by a kernel's statements."""
    tn = len(lanes)
    for u in memo_order(st, dep):
        dep[u] = u is g or any(dep[s] for s in u.src)

    def per_lane(u: UOp) -> UOp:
        return UOp(Ops.VECTORIZE, u.dtype.vec(tn), tuple(substitute_memo(u, {g: x}, m, tidy)
                                                           for x, m in zip(lanes, subs)))

    def operands(u: UOp) -> tuple[UOp, ...]:
        """What lift(u) lifts first (the shape of the recursion it replaces: a chain is as deep as the user wrote)."""
        if u.op in _CMP and all(s.dtype in _FLOATS for s in u.src):
            return tuple(s for s in u.src if dep[s])
        if u.op is Ops.WHERE and u.dtype in _FLOATS:  # a where epilogue (a mask): per lane it would copy the sum
            return tuple(s for s in u.src if dep[s] and (s.dtype in _FLOATS or s.op in _CMP))
        if u.dtype not in _FLOATS:
            return ()
        if u.op is Ops.REDUCE:
            return (u.src[0],)
        if u.op in _LIFT and all(s.dtype in _FLOATS for s in u.src):
            return tuple(s for s in u.src if dep[s])
        if u.op is Ops.CAST and u.src[0].dtype in _FLOATS and dep[u.src[0]]:
            return (u.src[0],)
        return ()

    def lift1(u: UOp) -> UOp:
        if u.op in _CMP and all(s.dtype in _FLOATS for s in u.src):
            return UOp(u.op, dtypes.bool.vec(tn), tuple(memo[s] if dep[s] else _broadcast(s, tn) for s in u.src))
        if u.op is Ops.WHERE and u.dtype in _FLOATS:
            return UOp(Ops.WHERE, u.dtype.vec(tn), tuple(memo[s] if s in memo else per_lane(s) if dep[s]
                                                         else _broadcast(s, tn) for s in u.src))
        if u.dtype not in _FLOATS:
            return per_lane(u)
        if u.op is Ops.REDUCE:
            return UOp(Ops.REDUCE, u.dtype.vec(tn), (memo[u.src[0]], *u.src[1:]), u.arg)
        if u.op in _LIFT and all(s.dtype in _FLOATS for s in u.src):
            return UOp(u.op, u.dtype.vec(tn), tuple(memo[s] if dep[s] else _broadcast(s, tn) for s in u.src), u.arg)
        if u.op is Ops.CAST and u.src[0].dtype in _FLOATS and dep[u.src[0]]:
            return UOp(Ops.CAST, u.dtype.vec(tn), (memo[u.src[0]],))
        return per_lane(u)  # loads (grouped into one vector load when consecutive), and everything else, lane by lane

    def lift(u: UOp) -> UOp:
        """u (which depends on g) as a vector of its tn lanes."""
        stack: list[tuple[UOp, bool]] = [(u, False)]
        while stack:
            x, ready = stack.pop()
            if x in memo:
                continue
            if ready:
                memo[x] = lift1(x)
                continue
            stack.append((x, True))
            stack.extend((s, False) for s in reversed(operands(x)) if s not in memo)
        return memo[u]

    val = st.src[1]
    ix = st.src[0]
    if not dep[val] or val.dtype not in _FLOATS:
        return [substitute_memo(st, {g: x}, subs[c], tidy).replace(arg=(st.arg, c)) for c, x in enumerate(lanes)]
    vec = lift(val)
    return [UOp(Ops.STORE, dtypes.void, (substitute_memo(ix, {g: x}, subs[c], tidy), vec.gep(c)), (st.arg, c))
            for c, x in enumerate(lanes)]


def _div(a: UOp, n: int) -> UOp:
    """a // n as passes.define_int_edges leaves it (a constant divisor but 0 and -1 has no edge case: marked "safe"):
    marked there, the range it bounds and every node above it were rebuilt once more (a tenth of lowering gemm)."""
    q = a // n
    return q.replace(arg="safe") if n not in (0, -1) else q


def _broadcast(u: UOp, n: int) -> UOp:
    return UOp(Ops.VECTORIZE, u.dtype.vec(n), (u,) * n)



class _Tidy:
    """simplify's first step, taken as the tiles are built instead of after: the optimizer's lanes (`i' * 16 + 3`)
    inside the user's indices made simplify rebuild nearly every node it made (the lanes' constants move outward),
    a tenth of lowering a matmul. The output is the one simplify gives anyway, not merely an equal value:

    simplify (passes.graph_rewrite) rewrites bottom-up in passes. A node whose sources are all *clean* (simplify
    leaves them and all below them as they are) becomes `simplify_step(node)` in its first pass; when that result
    is clean too, it is final, and the nodes above it see exactly it in that pass. So building the result in place
    of the node gives the same first pass, hence the same graph. Only integer scalars are replaced (indices: the
    optimizer's vector decisions look at float values), never in a way that changes whether a node depends on the
    vector axis (the optimizer's per-node decision). Used only where nothing runs between the optimizer and
    simplify (no scalar param to convert to its wire type, no half types, no unroll ranges: linearize.lower)."""

    def __init__(self, g: UOp | None, clean: dict[UOp, bool] | None = None):
        self.g = g  # None: what is built here cannot depend on the vector axis (it was substituted away)
        self.clean: dict[UOp, bool] = {} if clean is None else clean
        self.dep: dict[UOp, bool] = {}

    def is_clean(self, u: UOp) -> bool:
        known = self.clean
        if (k := known.get(u)) is not None:
            return k
        for x in memo_order(u, known):
            known[x] = simplify_step(x) is None and all(known[s] for s in x.src)
        return known[u]

    def on_g(self, u: UOp) -> bool:
        if self.g is None:
            return False
        m = self.dep
        if (k := m.get(u)) is not None:
            return k
        for x in memo_order(u, m):
            m[x] = x is self.g or any(m[s] for s in x.src)
        return m[u]

    def __call__(self, u: UOp) -> UOp:
        """u (built over sources that came through here), or its first simplify step where that one is final."""
        d = u.dtype
        if d.count != 1 or d.kind not in "iu":
            return u
        known = self.clean
        for s in u.src:
            k = known.get(s)
            if not (self.is_clean(s) if k is None else k):
                return u
        if (r := simplify_step(u)) is None:
            known[u] = True
            return u
        return r if self.is_clean(r) and (self.g is None or self.on_g(r) == self.on_g(u)) else u

    def expr(self, root: UOp) -> UOp:
        """`root` (an expression the optimizer just built) with each node passed through here, sources first."""
        out: dict[UOp, UOp] = {}
        for u in memo_order(root, out):
            src = tuple([out[s] for s in u.src])
            out[u] = self(u if src == u.src else UOp(u.op, u.dtype, src, u.arg))
        return out[root]


class _Keep(_Tidy):
    """No tidying: every node as built."""

    def __call__(self, u: UOp) -> UOp:
        return u

    def expr(self, root: UOp) -> UOp:
        return root


_keep = _Keep(None)
