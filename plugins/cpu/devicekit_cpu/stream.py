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
"""

from __future__ import annotations

import functools
import os

from devicekit.ir.ops import ALU, Ops

LINE = 64  # bytes per streaming store: one cache line
NO_VECTORIZE = '!{!"llvm.loop.vectorize.width", i32 1}, !{!"llvm.loop.interleave.count", i32 1}'
NO_UNROLL = '!{!"llvm.loop.unroll.disable"}'
_INVARIANT = frozenset({Ops.PARAM, Ops.VAR, Ops.SCALAR, Ops.CONST})
_VECTOR_OK = ALU | {Ops.CAST, Ops.BITCAST}


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


def plan(uops: list, i: int):
    """For the split RANGE at position i: (end position, the STORE, lanes) when its body is straight-line code
    (loads, ALU, casts) that stores exactly one output, of a 4- or 8-byte scalar type, at the range index itself,
    reads that output only at the same index, and uses the range only as a load or store index; else None."""
    r = uops[i]
    if r.op is not Ops.RANGE or r.src[0].op is not Ops.VAR or r.src[0].arg[0] != "core_start":
        return None
    q = next((j for j in range(i + 1, len(uops)) if uops[j].op is Ops.ENDRANGE and uops[j].src[0] is r), None)
    if q is None:
        return None
    body = uops[i + 1:q]
    dep, stores, indexes = {r}, [], []
    for b in body:
        if b.op in _INVARIANT:
            continue
        uses = any(s in dep for s in b.src)
        if b.op is Ops.INDEX:
            if len(b.src) > 2 or (uses and b.src[1] is not r) or b.src[0] in dep:
                return None
            indexes.append(b)
        elif b.op is Ops.LOAD:
            if len(b.src) != 1 or b.dtype.count != 1:
                return None
        elif b.op is Ops.STORE:
            stores.append(b)
        elif b.op in _VECTOR_OK:
            if r in b.src or (uses and b.dtype.count != 1):
                return None
        else:
            return None
        if uses:
            if b.op is not Ops.STORE and b.dtype.scalar().name == "index":  # no vector of addresses
                return None
            dep.add(b)
    if len(stores) != 1:
        return None
    st = stores[0]
    idx, val = st.src
    dt = val.dtype
    if idx.op is not Ops.INDEX or idx.src[1] is not r or dt.count != 1 or dt.is_bool or dt.itemsize not in (4, 8):
        return None
    out = idx.src[0]
    if any(x.src[0] is out and x.src[1] is not r for x in indexes):  # another element of the output: order matters
        return None
    inside = set(body)
    if any(s in inside for later in uops[q + 1:] for s in later.src):
        return None
    return q, st, LINE // dt.itemsize
