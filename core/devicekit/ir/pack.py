"""Packed tiles: the optimizer's form of a naive gemm on the CPU, b's panel copied into a local array per K block.

A register tile reads one line of b a k step. Unpacked, the lines of a panel are a row of b apart: at a power-of-two
row length (512 float32: 2 KiB) every line of a 192-line slice maps to the same two sets of a 48 KiB L1, so each row
tile of a reads the slice from the L2 again, and the tile (16 rows x 16 lanes: 17 loads for 16 multiply-adds) is
bound by its loads. BLAS packs b and widens the tile; `kernels.matmul` does so by hand (`_packed`). This module
builds the same form from the user's naive kernel, for any sizes (vars included):

    for kb in K blocks (of `kc` or fewer, kc from the L2):                  sequential ("block", outermost)
      for jt in column tiles of w = panels x lanes:                         sequential ("block")
        bt[rr, y] = B(lo + rr, jt * w + y)  for rr < block, y < w           each thread packs its own copy (local)
        for it in row tiles of tm rows:                                     the range split across threads
          acc[x, q] = sum over the block of A(row x, r) * bt[r - lo, q lanes]   (tm x panels vector accumulators)
          out[row x, lanes] = (kb > 0 ? out : 0) + acc                      and the epilogue at the last block

Each thread keeps its chunk of row tiles (as the unpacked tile did) and packs each (kb, jt) panel once for all of
them: the panel's lines are contiguous, and the tile is `tm` rows x two vectors (8 x 32 float32 on AVX-512: 10 loads
for 16 multiply-adds). Rows past M read the last row (clamped) and store nothing. The columns past the last whole
tile run after the whole tiles in tiles of one vector, lane by lane: zeros packed past N, the last column read,
nothing stored past N. The partial sums live in `out` (the rule of ir/kblock.py: only where exact, an ADD reduction
over one range from 0, no load of a buffer the kernel writes). What the statement computes lane by lane is the
user's own expression with its b loads read from the panel: the loads of a, the epilogue's loads (a bias, a mask)
and any arithmetic stay as written.

A transposed a (`a[r * m + i]`, the weight gradient x^T @ dh) reads a new line of a every k step at a stride no
prefetcher follows; there a is packed too, GotoBLAS's form (`_Tile.goto_tiles`): per K block, b's panels GOTO_TILES
at a time in one local block, and per row tile its kc x rows of a copied into a local tile, one vector a k step.
"""

from __future__ import annotations

from typing import Any

from .dtypes import dtypes
from .kblock import cache_bytes, l1_data_bytes
from .ops import Ops
from .passes import VEC_WIDTHS
from .rewrite import substitute_memo
from .uop import UOp, make_alu

PANELS = 2  # vectors a tile row spans where the register file holds tm x PANELS accumulators (8 x 2 on AVX-512)
MIN_KC = 64
PANEL_SHARE = 16  # the panel's share of the L2
MAX_PANEL_BYTES = 128 << 10
FALLBACK_L2 = 1 << 20  # the smallest L2 of the hosts this runs on (Zen 4, Zen 5); where sysfs says nothing
LINE = 64  # bytes of a cache line
MAX_PANELS = 1  # b loads packed (each a local array of kc x w on the thread's stack, and its edge's: 192 KiB)
GOTO_TILES = 4  # column tiles in the b block of the packed-a form (kc x 4 tiles of w lanes: MAX_PANEL_BYTES; with
# the a tile's two copies and the edge panel at most 176 KiB of the thread's stack, float64)


def block_kc(w: int, itemsize: int, rows_adjacent: bool = False, l2: int | None = None, l1: int | None = None) -> int:
    """Rows of a packed panel: w lanes of `itemsize` a row in a sixteenth of the L2 (2 MiB, 32 float32 lanes: 1024;
    Zen 4's 1 MiB: 512), at most MAX_PANEL_BYTES (the panel is on the thread's stack), a multiple of 16, MIN_KC at
    least. Fewer, longer blocks: the panel is read from the L2 as well as the L1 (the tile's 16 multiply-adds a k
    step hide it), and each block costs a pass over the tile's output; naive 1024^3 on one Rocket Lake thread:
    kc 192 (half the L1) 19.7-20.8 ms, 512 15.4-16.2, 1024 13.5-14.3 (numpy 13.5).

    `rows_adjacent`: a's rows are adjacent in memory (a transposed, `a[r * m + i]`: the MLP's weight gradient
    x^T @ dh). A row tile then reads a new line of a every k step, and the panel's kc lines of w lanes and those kc
    lines of a stay in half the L1 together (48 KiB, 32 float32 lanes: 128; Zen 4's 32 KiB: 80): 784x512x256 on
    one Rocket Lake thread, two paired runs 1.49-1.54 -> 1.46-1.50 ms, 256x512x784 1.47-1.61 -> 1.36-1.42."""
    if rows_adjacent:
        l1 = l1_data_bytes() if l1 is None else l1
        kc = (l1 // 2) // (w * itemsize + LINE)
    else:
        l2 = (cache_bytes(2) or FALLBACK_L2) if l2 is None else l2
        kc = min(l2 // PANEL_SHARE, MAX_PANEL_BYTES) // (w * itemsize)
    return max(MIN_KC, kc // 16 * 16)


def goto_kc(w: int, itemsize: int) -> int:
    """Rows of the packed-a form's b block: GOTO_TILES panels of w lanes in MAX_PANEL_BYTES (256 float32 rows of
    4 x 32 lanes), a multiple of 16; the a tile (kc x rows: 8 KiB) stays in the L1 while the panels stream from the
    L2. 784x512x256 on one Rocket Lake thread, the same loops written in C: a read in place 1.22-1.33 ms, packed a
    tiles against blocks of kc 128 x 256 lanes 1.10-1.13, 256 x 128 1.09, 256 x 256 (256 KiB) 1.06 (non-transposed
    a, b panels only: 1.06-1.18)."""
    return max(MIN_KC, MAX_PANEL_BYTES // (GOTO_TILES * w * itemsize) // 16 * 16)


def _packable_a(a_loads: list[UOp], adjacent: bool, i: UOp, r: UOp, free: dict[UOp, frozenset],
                rows: int) -> UOp | None:
    """The one load of a transposed a (adjacent rows) that the packed-a form copies a tile at a time: ungated, of
    one buffer, its index of i and r only; None where the form does not apply (a read in place then)."""
    if not adjacent or len(a_loads) != 1 or rows not in VEC_WIDTHS:  # the copy: one vector load a k step
        return None
    u = a_loads[0]
    if len(u.src) != 1 or len(u.src[0].src) != 2 or not free[u] <= {i, r} or r not in free[u]:
        return None
    return u


def worth_packing(m: UOp, n: UOp, rows: int, w: int) -> bool:
    """Whether a gemm of m rows and n columns gains from packing: a known m under two row tiles reads each panel
    once anyway, and a known n under one column tile is better served by the unpacked tile's vector tails. A var
    size may be large: it is packed."""
    return not (m.op is Ops.CONST and m.arg < 2 * rows) and not (n.op is Ops.CONST and n.arg < w)


def packed(st: UOp, i: UOp, j: UOp, free: dict[UOp, frozenset], nodes: list[UOp], lanes: int, rows: int,
           panels: int, next_id: int, tidy: Any) -> tuple[list[UOp], str] | None:
    """The packed statements for the one statement `st` over global ranges i (rows) and j (columns), and the opts
    text; None where the form does not apply (see the module's docstring). `lanes` a vector, `rows` x `panels`
    vectors a tile; `next_id`: the first free range id; `tidy`: the optimizer's builder of what it rewrites."""
    ix, val = st.src
    if st.op is not Ops.STORE or len(ix.src) != 2 or val.dtype not in (dtypes.float32, dtypes.float64):
        return None
    reds = [u for u in val.toposort() if u.op is Ops.REDUCE]
    if len(reds) != 1 or reds[0].arg is not Ops.ADD or len(reds[0].src) != 2 or reds[0].dtype != val.dtype:
        return None
    red = reds[0]
    r = red.src[1]
    if r.arg[1] != "reduce" or len(r.src) != 1 or any(x in free[r.src[0]] for x in (i, j)):
        return None
    written = {u.src[0].src[0] for u in nodes if u.op is Ops.STORE}
    loads = [u for u in nodes if u.op is Ops.LOAD]
    if any(u.src[0].src[0] in written for u in loads):
        return None
    body = red.src[0]
    bl = [u for u in body.toposort() if u.op is Ops.LOAD and j in free[u]]
    if not 1 <= len(bl) <= MAX_PANELS or any(i in free[u] or len(u.src) != 1 or len(u.src[0].src) != 2 for u in bl):
        return None  # a load of both axes (nothing to share), a gated one, or more panels than a thread's stack holds
    N, K = j.src[0], r.src[0]
    w = lanes * panels
    a_loads = [u for u in body.toposort() if u.op is Ops.LOAD and i in free[u] and u not in bl]
    from .optimize import _stride  # the optimizer's step of an index per step of a range (the vector axis's test)
    memo: dict = {}
    adjacent = any(len(u.src[0].src) == 2 and _stride(u.src[0].src[1], i, memo, free) == 1 for u in a_loads)
    a_packed = _packable_a(a_loads, adjacent, i, r, free, rows)
    kc = block_kc(w, val.dtype.itemsize, adjacent) if a_packed is None else goto_kc(w, val.dtype.itemsize)
    isz = dtypes.index
    # K blocks: nb = ceil(K / kc) (one at least: K = 0 still stores the epilogue of an empty sum), equal sizes <= kc
    nb = tidy.expr(_ceil_div(K, kc).maximum(1))
    size = tidy.expr(((K + nb - 1) // nb).replace(arg="safe"))
    kb = UOp(Ops.RANGE, isz, (nb,), (next_id, "block"))
    lo = tidy.expr(kb * size)
    hi = tidy.expr((lo + size).minimum(K))
    ragged = not (N.op is Ops.CONST and N.arg % w == 0)
    t = _Tile(st, red, i, j, r, bl, kb, lo, hi, nb, rows, lanes, kc, next_id, tidy)
    # full column tiles: vector loads and stores; the last, partial one (N % w columns) by itself, lane by lane
    full = tidy.expr(N // w if ragged else _div(N, w))
    if a_packed is not None:  # a transposed a: packed too, a tile at a time, against a block of b's panels
        stmts = t.goto_tiles(full, panels, a_packed, st.arg)
    else:
        stmts = t.column_tiles(UOp(Ops.RANGE, isz, (full,), (next_id + 1, "block")), 0, panels, False, st.arg)
    if ragged:  # the rest in tiles of one vector: half the lanes a 10-column layer computes and drops
        start = tidy.expr(full * w)
        edge = UOp(Ops.RANGE, isz, (tidy.expr(_ceil_div(N - start, lanes)),), (next_id + 2, "block"))
        stmts += t.column_tiles(edge, start, 1, True, st.arg + (2 if a_packed is None else 3))
    if a_packed is not None:
        return stmts, f"packed b blocks of {kc} x {GOTO_TILES * w}, packed a tiles of {kc} x {rows}, tiles {rows} x {w}"
    return stmts, f"packed b panels of {kc} x {w}, tiles {rows} x {w}"


class _Tile:
    """The pack and the register tile of one set of column tiles (see the module's docstring)."""

    def __init__(self, st: UOp, red: UOp, i: UOp, j: UOp, r: UOp, bl: list[UOp], kb: UOp, lo: UOp, hi: UOp,
                 nb: UOp, rows: int, lanes: int, kc: int, next_id: int, tidy: Any):
        self.st, self.red, self.i, self.j, self.r, self.bl = st, red, i, j, r, bl
        self.kb, self.lo, self.hi, self.nb = kb, lo, hi, nb
        self.rows, self.lanes, self.kc, self.ids, self.tidy = rows, lanes, kc, next_id + 3, tidy

    def _id(self) -> int:
        self.ids += 1
        return self.ids - 1

    def column_tiles(self, jt: UOp, base: Any, panels: int, edge: bool, k: int) -> list[UOp]:
        """Pack and tile statements for the column tiles of `panels` vectors from column `base` (statement numbers
        k and k + 1: the tile reads a settled panel). `edge`: columns past N exist (pack zeros, read the last column,
        store nothing)."""
        red, i, j, r, isz = self.red, self.i, self.j, self.r, dtypes.index
        w = self.lanes * panels
        M, N = i.src[0], j.src[0]
        lo, hi, tidy = self.lo, self.hi, self.tidy
        jj, lanes_of = self._lanes(panels)
        col = tidy.expr(base + jt * w + jj)
        jc = tidy.expr(col.minimum(N - 1)) if edge else col
        stmts: list[UOp] = []
        rr = UOp(Ops.RANGE, isz, (lo, hi), (self._id(), "loop"))
        rk = UOp(Ops.RANGE, isz, (lo, hi), (self._id(), "reduce"))
        from_panel = {}
        for n, u in enumerate(self.bl):
            bt = UOp(Ops.DEFINE_LOCAL, u.dtype, (), (f"packed_b{n}{'_edge' if edge else ''}", self.kc * w))
            at = substitute_memo(u.src[0].src[1], {r: rr, j: col}, {}, tidy)
            src = (UOp(Ops.INDEX, isz, (u.src[0].src[0], at, tidy.expr(col < N))), UOp.const(u.dtype, 0)) if edge else \
                (UOp(Ops.INDEX, isz, (u.src[0].src[0], at)),)
            stmts += lanes_of(UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, isz, (bt, tidy.expr((rr - lo) * w + jj))),
                                                           UOp(Ops.LOAD, u.dtype, src)), (k, "pack", n)))
            from_panel[u] = UOp(Ops.LOAD, u.dtype, (UOp(Ops.INDEX, isz, (bt, tidy.expr((rk - lo) * w + jj))),))
        rows, exact_m = self.rows, M.op is Ops.CONST and M.arg % self.rows == 0
        it = UOp(Ops.RANGE, isz, (tidy.expr(_div(M, rows) if exact_m else _ceil_div(M, rows)),), i.arg)
        for x in range(rows):
            row = tidy.expr(it * rows + x)
            at_row = row if exact_m else tidy.expr(row.minimum(M - 1))
            place = {i: at_row, j: jc}
            red_x = UOp(Ops.REDUCE, red.dtype, (substitute_memo(red.src[0], {**from_panel, r: rk, **place}, {}, tidy), rk),
                        Ops.ADD)
            gate = None if exact_m else tidy.expr(row < M)  # one gate for the row's lanes: its vector store stays one
            if edge:
                gate = tidy.expr(col < N if gate is None else gate & (col < N))
            stmts += lanes_of(self._row_store(place, red_x, gate, (k + 1, "tile", x)))
        return stmts

    def _lanes(self, panels: int) -> tuple[UOp, Any]:
        """The lane range of a tile `panels` vectors wide (constants once lifted) and the lifting of a statement
        over it: one vector a panel where the ops allow (the optimizer's `_vector_statement`)."""
        from .optimize import _vector_statement
        isz = dtypes.index
        jj = UOp(Ops.RANGE, isz, (UOp.const(isz, self.lanes * panels),), (self._id(), "global"))
        dep: dict = {}
        memos: list[dict] = [{} for _ in range(panels)]
        subs: list[list[dict]] = [[{} for _ in range(self.lanes)] for _ in range(panels)]
        lane_sets = [[UOp.const(isz, q * self.lanes + c) for c in range(self.lanes)] for q in range(panels)]

        def lanes_of(tmpl: UOp) -> list[UOp]:
            got: list[UOp] = []
            for q in range(panels):
                got += _vector_statement(tmpl, jj, lane_sets[q], dep, memos[q], subs[q], self.tidy)
            return got
        return jj, lanes_of

    def _row_store(self, place: dict, red_x: UOp, gate: UOp | None, arg: tuple) -> UOp:
        """A tile row's store: its sum over this K block added to the partial sum the blocks before left in out
        (none in the first), and at the last block the user's epilogue around the total."""
        ix, val = self.st.src
        out, tidy, isz = ix.src[0], self.tidy, dtypes.index
        to = substitute_memo(ix.src[1], place, {}, tidy)
        prev = UOp(Ops.LOAD, val.dtype, (UOp(Ops.INDEX, isz, (out, to)),))
        total = make_alu(Ops.WHERE, (self.kb.eq(0), UOp.const(val.dtype, 0.0), prev)) + red_x
        if val is not self.red:
            total = make_alu(Ops.WHERE, (self.kb.eq(self.nb - 1), substitute_memo(val, {**place, self.red: total}, {},
                                                                                   tidy), total))
        return UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, isz, (out, to) if gate is None else (out, to, gate)), total),
                   arg)


    def goto_tiles(self, full: UOp, panels: int, a_load: UOp, k: int) -> list[UOp]:
        """The packed-a form of the full column tiles (GotoBLAS's): per K block, b's panels GOTO_TILES at a time
        in one local block (statement k), and per row tile its kc x rows of a copied into a local tile (k + 1: one
        vector a k step, where the row-major load of a transposed a reads a new line a step with no prefetch
        across a 3 KiB stride), then the tile against each panel of the block (k + 2). The tile's rows are
        contiguous: the last tile starts at M - rows (its rows that belong to the tile before are computed again
        and not stored); below `rows` rows a copy clamped row by row (statement k + 1's second loop, which runs
        only then)."""
        from .optimize import _vector_statement
        red, r, isz = self.red, self.r, dtypes.index
        i, j, b_load = self.i, self.j, self.bl[0]
        w, rows, kc, tidy = self.lanes * panels, self.rows, self.kc, self.tidy
        M = i.src[0]
        lo, hi = self.lo, self.hi
        jc = UOp(Ops.RANGE, isz, (tidy.expr(_ceil_div(full, GOTO_TILES)),), (self._id(), "block"))
        in_block = tidy.expr((full - jc * GOTO_TILES).minimum(GOTO_TILES))
        jj, lanes_of = self._lanes(panels)

        # b's block: the panels of this column block, kc x w each, one after another
        tp = UOp(Ops.RANGE, isz, (in_block,), (self._id(), "loop"))
        rr = UOp(Ops.RANGE, isz, (lo, hi), (self._id(), "loop"))
        bb = UOp(Ops.DEFINE_LOCAL, b_load.dtype, (), ("packed_b_block", kc * GOTO_TILES * w))
        at = substitute_memo(b_load.src[0].src[1], {r: rr, j: tidy.expr((jc * GOTO_TILES + tp) * w + jj)}, {}, tidy)
        stmts = lanes_of(UOp(Ops.STORE, dtypes.void, (
            UOp(Ops.INDEX, isz, (bb, tidy.expr((tp * kc + (rr - lo)) * w + jj))),
            UOp(Ops.LOAD, b_load.dtype, (UOp(Ops.INDEX, isz, (b_load.src[0].src[0], at)),))), (k, "pack", 0)))
        # a's tile: rows start .. start + rows - 1 of the K block, a vector of rows a k step
        exact_m = M.op is Ops.CONST and M.arg % rows == 0
        it = UOp(Ops.RANGE, isz, (tidy.expr(_div(M, rows) if exact_m else _ceil_div(M, rows)),), i.arg)
        start = tidy.expr(it * rows) if exact_m else tidy.expr((it * rows).minimum(M - rows).maximum(0))
        # two copies, the column block's parity picking one: a statement's loops are the ranges it uses, so the
        # copy (which reads no column) uses jc to run inside the column block, after its pack of b
        pa = UOp(Ops.DEFINE_LOCAL, a_load.dtype, (), ("packed_a", 2 * kc * rows))
        base = tidy.expr((jc & 1) * kc)
        abuf, aix = a_load.src[0].src
        xx = UOp(Ops.RANGE, isz, (UOp.const(isz, rows),), (self._id(), "global"))
        whole = None if exact_m else tidy.expr(M < rows)  # fewer rows than a tile: the clamped copy instead
        ra = UOp(Ops.RANGE, isz, (lo, hi if whole is None else make_alu(Ops.WHERE, (whole, lo, hi))),
                 (self._id(), "loop"))
        copy = UOp(Ops.STORE, dtypes.void, (
            UOp(Ops.INDEX, isz, (pa, tidy.expr((base + ra - lo) * rows + xx))),
            UOp(Ops.LOAD, a_load.dtype, (UOp(Ops.INDEX, isz, (abuf, substitute_memo(
                aix, {r: ra, i: tidy.expr(start + xx)}, {}, tidy))),))), (k + 1, "pack_a", 0))
        stmts += _vector_statement(copy, xx, [UOp.const(isz, x) for x in range(rows)], {}, {},
                                   [{} for _ in range(rows)], tidy)
        if whole is not None:
            rs = UOp(Ops.RANGE, isz, (lo, make_alu(Ops.WHERE, (whole, hi, lo))), (self._id(), "loop"))
            for x in range(rows):
                stmts.append(UOp(Ops.STORE, dtypes.void, (
                    UOp(Ops.INDEX, isz, (pa, tidy.expr((base + rs - lo) * rows + x))),
                    UOp(Ops.LOAD, a_load.dtype, (UOp(Ops.INDEX, isz, (abuf, substitute_memo(
                        aix, {r: rs, i: tidy.expr((it * rows + x).minimum(M - 1))}, {}, tidy))),))),
                    (k + 1, "pack_a", 1 + x)))
        # the tile: rows x w against each panel of the block, from the two local copies
        t = UOp(Ops.RANGE, isz, (in_block,), (self._id(), "loop"))
        rk = UOp(Ops.RANGE, isz, (lo, hi), (self._id(), "reduce"))
        col = tidy.expr((jc * GOTO_TILES + t) * w + jj)
        from_b = UOp(Ops.LOAD, b_load.dtype, (UOp(Ops.INDEX, isz, (bb, tidy.expr((t * kc + (rk - lo)) * w + jj))),))
        for x in range(rows):
            row = tidy.expr(start + x)
            from_a = UOp(Ops.LOAD, a_load.dtype, (UOp(Ops.INDEX, isz, (pa, tidy.expr((base + rk - lo) * rows + x))),))
            place = {i: row if exact_m else tidy.expr(row.minimum(M - 1)), j: col}
            red_x = UOp(Ops.REDUCE, red.dtype, (substitute_memo(red.src[0], {b_load: from_b, a_load: from_a, r: rk,
                                                                             **place}, {}, tidy), rk), Ops.ADD)
            # a row of this tile (not the one before's, when the last tile starts early) and inside M
            gate = None if exact_m else tidy.expr((row < it * rows).logical_not() & (row < M))
            stmts += lanes_of(self._row_store(place, red_x, gate, (k + 2, "tile", x)))
        return stmts


def _div(a: UOp, n: int) -> UOp:
    return (a // n).replace(arg="safe")


def _ceil_div(a: UOp, n: int) -> UOp:
    return _div(a + (n - 1), n)
