"""Streaming (non-temporal) stores for the llvm pair: an outer loop that writes one output much larger than the
last-level cache is rendered a second time as a vector loop whose stores bypass the cache.

Why: a normal store first reads the line it writes (read-for-ownership): `out = a*b + c` moves 5 x 64 MB for 4 x
64 MB of data. A non-temporal store writes whole lines without reading them. LLVM's loop vectorizer refuses
`!nontemporal` stores it cannot prove aligned to the vector, so the renderer writes the vector loop itself: a scalar
peel up to the next 64-byte boundary of the output, a loop of one-cache-line vector stores (`align 64,
!nontemporal`), a `fence` (streaming stores are weakly ordered), then the ordinary loop for the rest. Which loop
runs is decided per launch, in the source, by the chunk's extent: a chunk whose output is below `threshold` bytes
takes the ordinary loop alone, so a small launch keeps its output in the cache for the next kernel. The threshold
is a literal of the source, so the cache key follows it.

The loop that streams is the innermost of the split range's nest: the split range itself (`out[i] = ...`), or the
inner loop of a 2-D (or deeper) kernel whose levels around it only compute indices and load (`out[i, j] = ...`, a
stencil, a copy of a grid): the same body rules, with the store's index unit-stride in the inner range (the range
plus values the loop does not change), and the output indexed nowhere else in the kernel. There the chunk's output
is the inner extent times the outer levels' extents (a row is far below the threshold, the chunk is not), each row
is peeled to its own line boundary, and the one fence follows the split range (a fence per row stalls on the write
combining buffers). Measured: see docs/decisions.md (CPU plugin, streaming stores).
"""

from __future__ import annotations

import functools
import os
from typing import Any, NamedTuple

from devicekit.ir.ops import ALU, Ops

LINE = 64  # bytes per streaming store: one cache line
NO_VECTORIZE = '!{!"llvm.loop.vectorize.width", i32 1}, !{!"llvm.loop.interleave.count", i32 1}'
NO_UNROLL = '!{!"llvm.loop.unroll.disable"}'
_INVARIANT = frozenset({Ops.PARAM, Ops.VAR, Ops.SCALAR, Ops.CONST})
_VECTOR_OK = ALU | {Ops.CAST, Ops.BITCAST}
_OUTER_OK = _INVARIANT | _VECTOR_OK | {Ops.INDEX, Ops.LOAD}  # what a level around the streaming loop may hold


@functools.cache
def llc_bytes() -> int:
    """Size of the host's last-level cache (Linux sysfs), 32 MiB where it cannot be read."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    best = (0, 32 << 20)
    try:
        for d in os.listdir(base):
            try:
                with open(f"{base}/{d}/level") as f:
                    level = int(f.read())
                with open(f"{base}/{d}/size") as f:
                    s = f.read().strip()
            except (OSError, ValueError):
                continue
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
            size = int(s.rstrip("KMG")) * mult if s.rstrip("KMG").isdigit() else 0
            if size and level >= best[0]:
                best = (level, size)
    except OSError:
        pass
    return best[1]


# a thread's share of the LLC is at most this much: a VM reports its host's whole LLC (a 2-vCPU VM on a Xeon read
# 480 MB), shared with every other tenant. Measured there (a*b+c, 2 threads, streaming vs not): 0.85-0.92x at 8 and
# 16 MB per array, 1.16x at 32 MB, 1.22x at 64 MB; the fused 16M row went from 7.4 ms to 5.4-5.7 ms (numba: 7.1)
THREAD_LLC_CAP = 16 << 20


def default_threshold() -> int:
    """Output bytes per chunk from which a launch streams: the LLC shared by the default number of threads (a
    launch whose whole output is larger than the last-level cache), each thread's share capped at THREAD_LLC_CAP."""
    from .hostinfo import num_threads
    return max(1 << 20, min(THREAD_LLC_CAP, llc_bytes() // num_threads()))


class Stream(NamedTuple):
    """A loop that streams: `loop` (a RANGE) and the position of its ENDRANGE, its one STORE, the lanes of a
    cache-line store; `outer`: the ranges around it up to the split range (empty when it is the split range), whose
    extents multiply into the chunk's output; `split_end`: the position of the split range's ENDRANGE (the fence
    follows it)."""
    loop: Any
    end: int
    store: Any
    lanes: int
    outer: tuple
    split_end: int
    unit: frozenset  # the loop's unit-stride values: the range and the ADD/SUB chains that offset it


def _end(uops: list, i: int) -> int | None:
    r = uops[i]
    return next((j for j in range(i + 1, len(uops)) if uops[j].op is Ops.ENDRANGE and uops[j].src[0] is r), None)


def plan(uops: list, i: int) -> Stream | None:
    """For the split RANGE at position i: the loop that streams, when the split range is the innermost loop of a nest
    (it alone, or it and ranges nested one in another) whose innermost body is straight-line code (loads, ALU,
    casts) storing exactly one output, of a 4- or 8-byte scalar type, at a unit-stride index of the innermost range
    (the range plus values it does not change); when that output is read nowhere in the kernel but at the stored
    index and stored nowhere else; when the levels around the innermost loop store nothing; else None."""
    r = uops[i]
    if r.op is not Ops.RANGE or r.src[0].op is not Ops.VAR or r.src[0].arg[0] != "core_start":
        return None
    split_end = _end(uops, i)
    if split_end is None:
        return None
    chain, lo, hi = [i], i, split_end  # the nest: each range's body holds the next range, nothing else loops
    while True:
        inner = [j for j in range(lo + 1, hi) if uops[j].op is Ops.RANGE]
        if not inner:
            break
        j = inner[0]
        q = _end(uops, j)
        if q is None or q >= hi or any(k > q for k in inner):
            return None
        if any(uops[k].op not in _OUTER_OK for k in (*range(lo + 1, j), *range(q + 1, hi))):
            return None
        chain.append(j)
        lo, hi = j, q
    got = _straight(uops, lo, hi)
    if got is None:
        return None
    st, unit = got
    idx = st.src[0]
    out = idx.src[0]
    for u in uops:  # the output is read or stored nowhere but at the stored index: the stream's order is its own
        if u.op is Ops.INDEX and u.src[0] is out and u is not idx and (len(u.src) > 2 or u.src[1] is not idx.src[1]):
            return None
    return Stream(uops[lo], hi, st, LINE // st.src[1].dtype.itemsize, tuple(uops[k] for k in chain[:-1]), split_end,
                  frozenset(unit))


def _straight(uops: list, i: int, q: int):
    """(the STORE, the unit-stride values) of the innermost RANGE at i (ENDRANGE at q) when its body is straight-line
    code as `plan` says; else None. Unit-stride: the range, and ADD/SUB of one of them and a value the loop does not
    change; they may be only indices of loads and the store (read as `lanes` elements from the first lane's index)."""
    r = uops[i]
    body = uops[i + 1:q]
    unit, dep, stores = {r}, {r}, []  # dep: values that change along the loop (unit-stride or data)
    for b in body:
        if b.op in _INVARIANT:
            continue
        uses = any(s in dep for s in b.src)
        if b.op in (Ops.ADD, Ops.SUB) and b.dtype.count == 1 and any(s in unit for s in b.src):
            x, y = b.src
            if (x in unit and y not in dep) or (b.op is Ops.ADD and y in unit and x not in dep):
                unit.add(b)
                dep.add(b)
                continue
            return None
        if any(s in unit for s in b.src) and b.op not in (Ops.INDEX, Ops.STORE):
            return None  # a lane-varying index used as data: no vector of it
        if b.op is Ops.INDEX:
            if len(b.src) > 2 or b.src[0] in dep or (uses and b.src[1] not in unit):
                return None
        elif b.op is Ops.LOAD:
            if len(b.src) != 1 or b.dtype.count != 1:
                return None
        elif b.op is Ops.STORE:
            stores.append(b)
        elif b.op in _VECTOR_OK:
            if uses and b.dtype.count != 1:
                return None
        else:
            return None
        if uses:
            if b.op not in (Ops.STORE, Ops.INDEX) and b.dtype.scalar().name == "index":  # no vector of addresses
                return None
            dep.add(b)
    if len(stores) != 1:
        return None
    st = stores[0]
    idx, val = st.src
    dt = val.dtype
    if idx.op is not Ops.INDEX or idx.src[1] not in unit or dt.count != 1 or dt.is_bool or dt.itemsize not in (4, 8):
        return None
    inside = set(body)
    if any(s in inside for later in uops[q + 1:] for s in later.src):
        return None
    return st, unit
