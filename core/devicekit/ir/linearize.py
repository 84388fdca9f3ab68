"""Lowering + linearization: a verified Kernel becomes the ordered op list of docs/linear-form.md (the scheduler
that orders it is ir/schedule.py).

Pipeline: unroll expansion -> half/bfloat16 handling -> constant folding -> range mapping (loops, GPU indices or the
CPU core split) -> decomposition of ops the renderer lacks -> scheduling into nested blocks -> a flat list.

Scheduling places every node in the shallowest loop that holds all the ranges it depends on (loop-invariant code is
hoisted: a row max in softmax is computed once per row), turns each REDUCE into an accumulator + loop, and never moves
a load from a buffer the kernel writes, nor anything after a barrier, out of the block where it is used.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from dataclasses import dataclass
from typing import Any

from .. import settings
from .analysis import free_ranges
from .bounds import ERROR_PARAM, BoundsChecks, guard_accesses
from .builder import Kernel
from .dtypes import dtypes, scalar_wire
from .ops import ALU, Ops
from .optimize import optimize
from .order import is_ordered_load
from .passes import decompose, define_int_edges, emulate_bf16, expand_unroll, group_vectors, promote_half, simplify
from .rewrite import graph_rewrite, rewrite_once, substitute
from .schedule import KIND_RANK, Scheduler
from .uop import KernelError, SymInt, UOp, no_sites


@dataclass
class LinearKernel:
    name: str
    params: tuple
    vars: tuple
    uops: list[UOp]
    global_size: tuple[SymInt, ...] | None
    local_size: tuple[SymInt, ...] | None
    core_split: SymInt | None
    outs: tuple[int, ...]
    ins: tuple[int, ...]
    checks: BoundsChecks | None = None  # run-time bounds checks: the last param is then the hidden error buffer
    opts: tuple[str, ...] = ()  # what the heuristic optimizer did (ir/optimize.py), in words

    def __str__(self) -> str:
        return format_linear(self.uops)


def lower(kernel: Kernel, caps: Any) -> LinearKernel:
    """The linear form of `kernel` for a renderer's capabilities (see the module docstring)."""
    with no_sites(), _no_gc():
        return _lower(kernel, caps)


_GC_LOCK = threading.Lock()
_GC_HOLDERS = [0, False]  # lowerings running (all threads), whether the collector was on before the first


@contextlib.contextmanager
def _no_gc():
    """No cyclic collection while lowering: it makes thousands of nodes that cannot form cycles (a UOp is immutable
    and its sources exist before it), and the collections their allocations triggered were a third of lowering a
    matmul (25 of 80 ms). The collector is back on (if it was) when the last lowering of the process ends."""
    with _GC_LOCK:
        if _GC_HOLDERS[0] == 0:
            _GC_HOLDERS[1] = gc.isenabled()
            gc.disable()
        _GC_HOLDERS[0] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_HOLDERS[0] -= 1
            if _GC_HOLDERS[0] == 0 and _GC_HOLDERS[1]:
                gc.enable()


class _Kinds:
    """What a graph holds (its ops, its scalar dtypes), taken once per sink: whether a pass has anything to do. A
    pass that cannot apply is skipped (each is a full rewrite of the graph); asking each question of every node
    again cost as much as a pass."""

    def __init__(self) -> None:
        self.sink: UOp | None = None

    def of(self, sink: UOp) -> _Kinds:
        if sink is not self.sink:
            self.sink, self.nodes = sink, sink.toposort()
            self.ops = {u.op for u in self.nodes}
            self.dts = {d.scalar() for d in {u.dtype for u in self.nodes}}
        return self

    def has(self, sink: UOp, ops: frozenset = frozenset(), dts: frozenset = frozenset()) -> bool:
        k = self.of(sink)
        return not k.ops.isdisjoint(ops) or not k.dts.isdisjoint(dts)


_HALVES = frozenset({dtypes.float16, dtypes.bfloat16})
_INT_EDGES = frozenset({Ops.SHL, Ops.SHR, Ops.IDIV, Ops.MOD})
_EDGE_DONE = {Ops.SHL: "masked", Ops.SHR: "masked", Ops.IDIV: "safe", Ops.MOD: "safe"}  # define_int_edges' marks


def _lower(kernel: Kernel, caps: Any) -> LinearKernel:
    sink = kernel.sink
    kinds = _Kinds()
    _has = kinds.has
    if _has(sink, frozenset({Ops.BARRIER, Ops.DEFINE_LOCAL})):
        sink = graph_rewrite(sink, _strip_orderings)
    sink, err, checks = guard_accesses(kernel, sink)  # before anything else: proofs hold on the user's graph
    param_uops = kernel.param_uops if err is None else (*kernel.param_uops, err)
    # the params as the renderer sees them (no size), on the user's small graph: stripped after the optimizer, every
    # node above them was rebuilt once more (a tenth of lowering a matmul). No pass reads a param's size.
    bare = tuple(p.replace(src=()) for p in param_uops)
    sink = substitute(sink, {p: q for p, q in zip(param_uops, bare) if p is not q})
    opts: tuple[str, ...] = ()
    if kernel.optimize and err is None and settings.get("DEVICEKIT_OPT"):
        sink, opts = optimize(sink, caps, kernel.tiles)
    # scalars travel as their wire dtype (bool as uint8, half/bfloat16 as float32) and are converted once, inside
    wire = {v: v.replace(dtype=scalar_wire(v.dtype)) for v in kernel.var_uops
            if v.op is Ops.SCALAR and scalar_wire(v.dtype) != v.dtype}
    if wire:
        sink = substitute(sink, {v: w.cast(v.dtype) for v, w in wire.items()})
    if _has(sink, dts=_HALVES):
        sink = promote_half(sink)
    if Ops.RANGE in kinds.of(sink).ops and any(u.op is Ops.RANGE and u.arg[1] == "unroll" for u in kinds.nodes):
        sink = expand_unroll(sink)
    sink = simplify(sink)
    if _has(sink, _INT_EDGES) and any(u.op in _INT_EDGES and u.arg != _EDGE_DONE[u.op] for u in kinds.nodes):
        sink = define_int_edges(sink)  # (skipped where every such node is already marked: the optimizer's tiles)
    sink, gsize, lsize, split, guard = _map_ranges(sink, caps)
    if dtypes.bfloat16 not in caps.dtypes and _has(sink, dts=frozenset({dtypes.bfloat16})):
        sink = emulate_bf16(sink)
    if any(op in ALU and (op not in caps.ops or op is Ops.MULACC) for op in kinds.of(sink).ops):
        sink = decompose(sink, caps.ops, wide=dtypes.float64 in caps.dtypes)
    sink = simplify(sink)
    if caps.vectors and (len(sink.src) > 1 or _has(sink, frozenset({Ops.VECTORIZE}))):
        sink = group_vectors(sink, getattr(caps, "unaligned_vectors", False))
    _check_dtypes(sink, caps, kernel.var_uops)
    params = tuple(p if p.dtype != dtypes.bfloat16 or dtypes.bfloat16 in caps.dtypes
                   else p.replace(dtype=dtypes.uint16) for p in bare)  # bfloat16 as its bits (emulate_bf16)
    sink = substitute(sink, {p: q for p, q in zip(bare, params) if p is not q})
    core_vars = ()
    if split is not None:
        core_vars = tuple(u for u in sink.toposort() if u.op is Ops.VAR and u.arg[0] in ("core_start", "core_end"))
        core_vars = tuple(sorted(core_vars, key=lambda u: u.arg[0] != "core_start"))
    head = [*params, *(wire.get(v, v) for v in kernel.var_uops), *core_vars]
    uops = Scheduler(sink, caps, head, guard).run()
    outs = tuple(sorted({u.src[0].src[0].arg[0] for u in uops if u.op is Ops.STORE and u.src[0].src[0].op is Ops.PARAM}))
    ins = tuple(sorted({u.src[0].src[0].arg[0] for u in uops if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.PARAM}))
    pspecs = kernel.params
    if checks is not None:
        from .params import ParamSpec
        pspecs = (*pspecs, ParamSpec(ERROR_PARAM, dtypes.int64, checks.size, True))
    return LinearKernel(kernel.name, pspecs, kernel.vars, uops, gsize, lsize, split, outs, ins, checks, opts)


def _strip_orderings(u: UOp) -> UOp | None:
    """Barrier dependencies only served to order the builder's statements; the scheduler keeps that order itself.
    A load from local memory keeps its build point ("after", last store, statement: ir/order.py) in its arg, which
    also tells the scheduler the barrier epoch it belongs to (it must read before the next barrier); a hand-built
    one without it keeps its barrier epoch ("epoch", barrier)."""
    if u.op is Ops.BARRIER and u.src:
        return u.replace(src=())
    if u.op is Ops.LOAD and u.src and u.src[-1].op is Ops.BARRIER:
        return u.replace(src=u.src[:-1], arg=u.arg if is_ordered_load(u) else ("epoch", u.src[-1].arg))
    if u.op is Ops.LOAD and u.arg is None and u.src[0].src[0].op is Ops.DEFINE_LOCAL:
        return u.replace(arg=("epoch", -1))
    if u.op is Ops.STORE and len(u.src) == 3:
        return u.replace(src=u.src[:2])
    return None


def _sym(u: UOp) -> SymInt:
    return u.arg if u.op is Ops.CONST else u


def _check_dtypes(sink: UOp, caps: Any, scalars: tuple[UOp, ...] = ()) -> None:
    allowed = set(caps.dtypes) | {dtypes.void, dtypes.bool, dtypes.index}
    for v in scalars:  # also the unused ones: each is an argument of the kernel
        if v.op is Ops.SCALAR and scalar_wire(v.dtype) not in allowed:
            raise KernelError(f"scalar {v.arg}: the renderer does not support {scalar_wire(v.dtype)}", v)
    for u in sink.toposort():
        s = u.dtype.scalar()
        if s not in allowed:
            raise KernelError(f"the renderer does not support {s}", u)
        if u.dtype.count > 1 and not caps.vectors:
            raise KernelError(f"the renderer has no vector types ({u.dtype})", u)


# ---- ranges -> loops, GPU indices, the CPU core split -----------------------------------------------------------------

def _no_barrier_in_lane_loop(stmts: tuple[UOp, ...], free: dict[UOp, frozenset]) -> None:
    """Without GPU indices a `local` range runs as a loop, and a barrier between two statements that both run in it
    closes nothing: lane j would read the tile before lanes j+1.. stored their elements (garbage on both CPU pairs,
    where the reference and the GPUs agree). Refused by name instead; a workgroup of one lane is fine."""
    for n, st in enumerate(stmts):
        if st.op is not Ops.BARRIER:
            continue
        before = next((s for s in reversed(stmts[:n]) if s.op is not Ops.BARRIER), None)
        after = next((s for s in stmts[n + 1:] if s.op is not Ops.BARRIER), None)
        if before is None or after is None:
            continue
        for r in free[before] & free[after]:
            if r.op is Ops.RANGE and r.arg[1] == "local" and not (r.src[0].op is Ops.CONST and r.src[0].arg <= 1):
                raise KernelError(f"a barrier between two statements of local range {r.arg[0]}: this device runs a "
                                  "local range as a loop, so a lane cannot see what the lanes after it store; run "
                                  "the kernel on a GPU device", st)


def _map_ranges(sink: UOp, caps: Any):
    nodes = sink.toposort()
    free = free_ranges(nodes)
    stmt_ranges = sorted(set().union(*(free[s] for s in sink.src)), key=lambda r: (KIND_RANK[r.arg[1]], r.arg[0]))
    if not caps.gpu_indexing:
        _no_barrier_in_lane_loop(sink.src, free)
    zero = UOp.const(dtypes.index, 0)
    mapping: dict[UOp, UOp] = {}  # global/local ranges -> GPU indices or the CPU split; every other range: to_loop
    gsize = lsize = split = guard = None
    all_glob = [r for r in stmt_ranges if r.arg[1] == "global"]
    uses = [{r for r in free[st] if r.arg[1] == "global"} for st in sink.src if st.op is Ops.STORE]
    # independent iteration spaces (bicg: s over j, q over i, no statement using both): one index over their
    # concatenation, each space's range clipped to the piece a thread (GPU) or a chunk (CPU) owns; never a cross
    # product (each statement recomputed for every lane of the other) and never a space run by every chunk
    spaces = len(all_glob) > 1 and all(len(u) <= 1 for u in uses)

    def concatenated(start: UOp, stop: UOp) -> UOp:
        """Map each space to its part of [start, stop) of the concatenation; the total extent."""
        total = all_glob[0].src[0]
        for g in all_glob[1:]:
            total = total + g.src[0]
        off: UOp | None = None
        for g in all_glob:
            end = g.src[0]
            lo = start if off is None else (start - off).maximum(0)
            hi = (stop if off is None else stop - off).minimum(end)
            mapping[g] = UOp(Ops.RANGE, dtypes.index, (lo, hi), g.arg)
            off = end if off is None else off + end
        return total

    if caps.gpu_indexing:
        glob = all_glob[:3]
        loc = [r for r in stmt_ranges if r.arg[1] == "local"]
        if len(loc) > 3:
            raise KernelError("at most 3 local ranges", loc[3])
        if spaces and not loc:  # one thread per element of the concatenation: its one iteration of one space
            lmax = caps.local_max[0] if caps.local_max else 256
            width = min(256, lmax)
            total = sum((g.src[0].arg for g in all_glob), 0) if all(g.src[0].op is Ops.CONST for g in all_glob) \
                else None
            if total is not None and total < width:
                width = max(1, total)
            ends = all_glob[0].src[0]
            for g in all_glob[1:]:
                ends = ends + g.src[0]
            nblocks = -(-total // width) if total is not None else (ends + (width - 1)) // width
            g0 = UOp(Ops.SPECIAL, dtypes.index, (UOp.const(dtypes.index, nblocks) if isinstance(nblocks, int)
                                                 else nblocks,), ("gidx0", 0))
            idx = g0 * width + UOp(Ops.SPECIAL, dtypes.index, (UOp.const(dtypes.index, width),), ("lidx0", 0))
            concatenated(idx, idx + 1)
            gsize, lsize = (_sym(nblocks) if isinstance(nblocks, UOp) else nblocks,), (width,)
        elif loc:
            for k, g in enumerate(glob):
                mapping[g] = UOp(Ops.SPECIAL, dtypes.index, (g.src[0],), (f"gidx{k}", k))
            for k, lr in enumerate(loc):
                mapping[lr] = UOp(Ops.SPECIAL, dtypes.index, (lr.src[0],), (f"lidx{k}", k))
            gsize = tuple(_sym(g.src[0]) for g in glob) or (1,)
            lsize = tuple(_sym(lr.src[0]) for lr in loc)
        elif glob:
            end = glob[0].src[0]
            lmax = caps.local_max[0] if caps.local_max else 256
            width = min(256, lmax)
            if end.op is Ops.CONST and end.arg < width:
                width = max(1, end.arg)
            nblocks = (end + (width - 1)) // width if end.op is not Ops.CONST else -(-end.arg // width)
            g0 = UOp(Ops.SPECIAL, dtypes.index, (nblocks if isinstance(nblocks, UOp) else UOp.const(dtypes.index, nblocks),), ("gidx0", 0))
            l0 = UOp(Ops.SPECIAL, dtypes.index, (UOp.const(dtypes.index, width),), ("lidx0", 0))
            idx = g0 * width + l0
            mapping[glob[0]] = idx
            if not (end.op is Ops.CONST and end.arg % width == 0):
                guard = idx < end
            for k, g in enumerate(glob[1:], start=1):
                mapping[g] = UOp(Ops.SPECIAL, dtypes.index, (g.src[0],), (f"gidx{k}", k))
            gsize = (_sym(nblocks) if isinstance(nblocks, UOp) else nblocks, *(_sym(g.src[0]) for g in glob[1:]))
            lsize = (width,) + (1,) * (len(glob) - 1)
        else:
            gsize, lsize = (1,), (1,)
    elif caps.core_split:
        glob = all_glob
        if spaces:
            vmax = sum(g.src[0].vmax for g in glob)
            start = UOp(Ops.VAR, dtypes.index, (), ("core_start", 0, vmax))
            stop = UOp(Ops.VAR, dtypes.index, (), ("core_end", 0, vmax))
            split = _sym(concatenated(start, stop))
        elif glob:
            g = glob[0]
            hi = g.src[0].vmax
            start = UOp(Ops.VAR, dtypes.index, (), ("core_start", 0, hi))
            stop = UOp(Ops.VAR, dtypes.index, (), ("core_end", 0, hi))
            mapping[g] = UOp(Ops.RANGE, dtypes.index, (start, stop), g.arg)
            split = _sym(g.src[0])
    def to_loop(u: UOp) -> UOp | None:
        """Global and local ranges (never triangular) by identity; every other range gets its (start, end) form,
        a triangular one after its bounds were rebuilt over the new outer ranges."""
        if (m := mapping.get(u)) is not None:
            return m
        if u.op is Ops.RANGE and len(u.src) == 1:
            return UOp(Ops.RANGE, dtypes.index, (zero, u.src[0]), u.arg)
        return None
    sink = rewrite_once(sink, to_loop)
    return sink, gsize, lsize, split, guard


def format_linear(uops: list[UOp]) -> str:
    """A readable listing of a linear op list (used by docs, DEVICEKIT_DEBUG and `devicekit compile --show ir`)."""
    names: dict[UOp, str] = {}
    lines, depth = [], 0
    for n, u in enumerate(uops):
        names[u] = f"%{n}"
        if u.op in (Ops.ENDRANGE, Ops.ENDIF):
            depth -= 1
        srcs = " ".join(names.get(s, "?") for s in u.src)
        arg = "" if u.arg is None else f" {u.arg!r}"
        lines.append(f"{n:4d} {'  ' * depth}{u.op.name:<12} {u.dtype!s:<22} {srcs}{arg}")
        if u.op in (Ops.RANGE, Ops.IF):
            depth += 1
    return "\n".join(lines)
