"""K blocking of the optimizer's register tiles on the CPU (ir/optimize.py calls it after the upcast).

A tiled gemm walks, for each tile of `rows` rows of a and `width` lanes of b, the whole reduction: a's rows (rows x K
values) are read again for every column tile and b's column panel (K lines) for every row tile. Neither stays in the
L1 once K x (rows + width) values pass it, and at a power-of-two row length every line of b's panel maps to the same
few cache sets (a 1024^3 float32 gemm ran at half the speed of a 256 x 512 x 784 one). Blocking the reduction in
slices of `kc` keeps a's slice of the tile in the L1 while every column tile of the row tile uses it, and b's slice
(kc x N) in the L2 across row tiles:

    out[i, j] = R over [0, min(K, kc))                                   for the row tile's column tiles
    for kb in 1 .. ceil(K / kc) - 1:  out[i, j] = out[i, j] + R over block kb   (a column-tile loop inside)
    out[i, j] = epilogue(out[i, j])                                      (only where the value is not R itself)

The partial sums live in `out` itself; `kc` comes from the host's L1 data cache (`l1_data_bytes`): a's slice and
one b line a k step fill half of it. Applied only where the rewrite is exact: every tiled statement stores a lane of
one vector value holding exactly one ADD reduction over the kernel's one reduce range (start 0), the kernel loads
no buffer it writes (launches refuse aliased Buffers), and the CPU runs the loops in order (`core_split`: the row
tiles are the range split across threads; the block and column-tile loops are sequential `loop` ranges inside it).
Summation order changes only by blocks (the renderer already splits accumulators).
"""

from __future__ import annotations

import functools
import os

from .analysis import free_ranges
from .dtypes import dtypes
from .ops import Ops
from .rewrite import substitute_memo
from .uop import UOp

MIN_KC = 64  # the narrowest slice: below it the partial sums' loads and stores cost more than the reuse gains
FALLBACK_L1 = 32 * 1024  # the smallest L1d of the hosts this runs on (Zen 4); used where sysfs says nothing


def l1_data_bytes() -> int:
    """The L1 data cache of CPU 0 from sysfs (level 1, type Data); FALLBACK_L1 where it cannot be read."""
    return cache_bytes(1) or FALLBACK_L1


@functools.cache
def cache_bytes(level: int) -> int:
    """The data (or unified) cache of CPU 0 at `level` from sysfs; 0 where it cannot be read."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for d in sorted(os.listdir(base)):
            p = os.path.join(base, d)
            with open(os.path.join(p, "level")) as f:
                lv = f.read().strip()
            with open(os.path.join(p, "type")) as f:
                kind = f.read().strip()
            if lv == str(level) and kind in ("Data", "Unified"):
                with open(os.path.join(p, "size")) as f:
                    s = f.read().strip().upper()
                n = int(s.rstrip("KMB"))
                return n * (1024 if s.endswith("K") else 1024 * 1024 if s.endswith("M") else 1)
    except (OSError, ValueError):
        pass
    return 0


def block_k(rows: int, width: int, itemsize: int, l1: int | None = None) -> int:
    """The slice of K: a's `rows` x kc values and kc lines of b's `width` lanes in half the L1, a multiple of 16
    (48 KiB, 16 x 16 float32: 192; 32 KiB: 128)."""
    l1 = l1_data_bytes() if l1 is None else l1
    kc = (l1 // 2) // max(1, (rows + width) * itemsize)
    return max(MIN_KC, kc // 16 * 16)


def kblock(stmts: list[UOp], jr: UOp, kc: int, next_id: int) -> list[UOp] | None:
    """The statements with the tile's reduction blocked by `kc` (see the module's docstring); None where the rewrite
    does not apply. `jr`: the upcast's column-tile range; `next_id`: the first free range id."""
    sink = UOp(Ops.SINK, dtypes.void, tuple(stmts))
    nodes = sink.toposort()
    free = free_ranges(nodes)
    written = {st.src[0].src[0] for st in stmts}
    if any(u.op is Ops.LOAD and u.src[0].src[0] in written for u in nodes):
        return None
    main = [st for st in stmts if jr in free[st]]
    if not main or any(st.op is not Ops.STORE or st.src[1].op is not Ops.GEP for st in main):
        return None
    reds: dict[UOp, UOp] = {}  # vector value -> its one reduction
    for st in main:
        v = st.src[1].src[0]
        if v in reds:
            continue
        rs = [u for u in v.toposort() if u.op is Ops.REDUCE]
        if len(rs) != 1 or rs[0].arg is not Ops.ADD or len(rs[0].src) != 2 or rs[0].dtype.count != v.dtype.count:
            return None
        reds[v] = rs[0]
    rset = {red.src[1] for red in reds.values()}
    if len(rset) != 1:
        return None
    r = rset.pop()
    if len(r.src) != 1 or r.arg[1] != "reduce":
        return None
    end = r.src[0]
    if end.op is Ops.CONST and end.arg < 2 * kc:  # one block
        return None
    # a column-tile loop of its own for each part: a loop the scheduler reopens is substituted statement by
    # statement, and a row's reduction would no longer share the k loop of the row before it
    jl = [UOp(Ops.RANGE, dtypes.index, jr.src, (next_id + 3 + x, "loop")) for x in range(3)]
    # K // kc blocks (one at least) of equal size, between kc and 2 kc: a K of 1.3 kc runs as one block, not as kc
    # and a short remainder; nb >= 1, so the run-time division needs no edge case ("safe")
    nb = (end // kc).replace(arg="safe").maximum(1)
    size = ((end + nb - 1) // nb).replace(arg="safe")
    kb = UOp(Ops.RANGE, dtypes.index, (nb - 1,), (next_id + 2, "block"))
    r0 = UOp(Ops.RANGE, dtypes.index, (size,), (next_id, "reduce"))
    lo = (kb + 1) * size
    r1 = UOp(Ops.RANGE, dtypes.index, (lo, (lo + size).minimum(end)), (next_id + 1, "reduce"))
    parts: list[list[UOp]] = [[], [], []]  # the first block, the blocks after it, the epilogue
    for x, (rk, part) in enumerate(((r0, parts[0]), (r1, parts[1]), (None, parts[2]))):
        mj: dict = {}  # per part: the rows share their loads of b
        lanes: dict[UOp, dict[int, UOp]] = {}  # vector value -> lane -> the store's index
        moved = [substitute_memo(st, {jr: jl[x], r: rk} if rk is not None else {jr: jl[x]}, mj) for st in main]
        for st in moved:
            lanes.setdefault(st.src[1].src[0], {})[st.src[1].arg] = st.src[0]
        prev: dict[UOp, UOp] = {}
        for st in moved:
            ix, v, c = st.src[0], st.src[1].src[0], st.src[1].arg
            red = next(u for u in v.toposort() if u.op is Ops.REDUCE)
            if x == 0:
                part.append(st.replace(src=(ix, red.gep(c))))
                continue
            if v not in prev:
                idx = lanes[v]
                if sorted(idx) != list(range(v.dtype.count)):
                    return None
                prev[v] = UOp(Ops.VECTORIZE, v.dtype, tuple(UOp(Ops.LOAD, v.dtype.scalar(), (idx[y].replace(
                    src=idx[y].src[:2]),)) for y in range(v.dtype.count)))
            p = prev[v]
            if x == 1:
                part.append(st.replace(src=(ix, (p + red).gep(c))))
            elif v is not red:
                part.append(st.replace(src=(ix, substitute_memo(v, {red: p}, {}).gep(c))))
    rest = [st for st in stmts if jr not in free[st]]
    return parts[0] + parts[1] + parts[2] + rest

