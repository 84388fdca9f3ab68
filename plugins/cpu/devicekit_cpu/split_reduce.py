"""A lone reduction split across the thread pool: `o[0] = x[r].sum(r)` as two stages in one function.

Why: the runtime splits a kernel's outer *global* range across its threads (`core_split`). A reduction with no
global range (or one of extent 1) has nothing to split, so `o[0] = x[r].sum(r)` over 16M float32 ran on one
thread (3.8-5.3 ms on a Rocket Lake Xeon) where `kernels.reduce("sum")` over a (parts x n/parts) view plus a sum
of the parts took ~1.5 ms (issue 36). This rewrite of the llvm pair's linear form does what that library path does
by hand, inside one native function whose split range is the partial index:

- the reduce range [start, end) is cut into `P = min(PARTS, max(1, extent // CHUNK))` contiguous pieces, P from
  the extent alone: piece p covers `start + p*q + min(p, rem)` for `q + (p < rem)` elements (q, rem = divmod);
- **stage 1** (`core_start <= p < core_end`, one chunk of pieces per thread): each piece's accumulators from their
  initial values over the piece, stored to slot p of a scratch (one 64-byte line per slot: no false sharing);
- **stage 2** (once, after every piece): each accumulator from its initial value, updated with slots 0, 1, ...,
  P-1 in that order by the loop's own update op, then the rest of the kernel (the stores).

The arguments are the kernel's, then `core_start`, `core_end` and `core.scratch` (an address as an int64). The
runtime (runtime.CPUProgram) calls `(0, P, 0)` on one thread: stage 1 for every piece into a scratch on the stack,
then stage 2; on several threads `(lo_i, hi_i, s)` on each, then `(-1, -1, s)` (no piece, stage 2 from s). So the
result's bits depend on the extent only, never on the thread count or on timing (the same-bits rule): the pieces
and the combine order are the same in both paths, in the same compiled code.

Exactness: integer sums, products and maxima are exact in any order. A float sum or product is reassociated: the
llvm pair already gives every reduction accumulator `reassoc` (docs/decisions.md, CPU plugin, Semantics: "the order
of a reduction is not part of the contract"), and the PYTHON reference's comparisons allow it. The C pair keeps
floats in order (`-ffp-contract=off`, no reassociation), so this rewrite is the llvm pair's alone.

What it takes (anything else is rendered as before): no bounds-check record, no GPU launch dims; a core split of
none or 1 (a `k.range(1, "global")`); before the first top-level loop only values (params, vars, constants,
indices, loads, arithmetic, accumulator definitions); that loop a `reduce` range whose bounds are functions of the
vars, whose body only loads and computes and updates one or more accumulators (ADD, MUL, MAX, or a MULACC into the
accumulator), each read only by its update, and whose values are not used after it. What follows the loop (the
stores, further loops) runs in stage 2 as it was.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from devicekit.ir.dtypes import dtypes
from devicekit.ir.linearize import LinearKernel
from devicekit.ir.ops import ALU, Ops
from devicekit.ir.uop import _SYM_ALU, UOp, no_sites

from . import hostinfo

PARTS = 64  # pieces at most: 32 a thread on 2 threads, balanced within one piece up to ~16 threads
CHUNK = 1 << 15  # elements a piece at least (128 KB of float32): a piece's loop overhead is far below 1%
LINE = 64  # bytes of one scratch slot
SCRATCH_VAR = "core.scratch"  # not an identifier: no user name can take it (ir/names.py)

_VALUES = frozenset({Ops.PARAM, Ops.VAR, Ops.SCALAR, Ops.CONST, Ops.INDEX, Ops.LOAD, Ops.CAST, Ops.BITCAST,
                     Ops.VECTORIZE, Ops.GEP, Ops.DEFINE_ACC}) | ALU
_BODY = frozenset({Ops.CONST, Ops.INDEX, Ops.LOAD, Ops.CAST, Ops.BITCAST, Ops.VECTORIZE, Ops.GEP, Ops.ASSIGN}) | ALU
_UPDATES = {Ops.ADD: Ops.ADD, Ops.MUL: Ops.MUL, Ops.MAX: Ops.MAX, Ops.MULACC: Ops.ADD}  # update op -> combine op


@dataclasses.dataclass
class SplitKernel(LinearKernel):
    """The rewritten linear kernel: `scratch_bytes` of scratch a launch on several threads passes (`core.scratch`),
    `regions`: (scratch param name, byte offset) of each accumulator's slots."""

    scratch_bytes: int = 0
    regions: tuple[tuple[str, int], ...] = ()
    loop_hints: tuple[tuple[Any, tuple[str, ...]], ...] = ()


@dataclasses.dataclass(frozen=True)
class Plan:
    """Where the lone reduction is: its loop (RANGE at `at`, ENDRANGE at `end`) and accumulators with their combine
    ops; `parts` (SymInt over the vars) and `cost` (estimated ops a piece) for the runtime."""

    at: int
    end: int
    accs: tuple[tuple[UOp, Ops, bool], ...]  # (DEFINE_ACC, combine op, acc is the update's first operand)
    parts: Any
    cost: Any


def plan(lk: Any) -> Plan | None:
    """The lone reduction of `lk` (see the module docstring), or None when it has none this rewrite takes."""
    global _last
    last = _last
    if last is not None and last[0] is lk:  # asked by the render and by the meta of one render
        return last[1]
    with no_sites():
        found = _plan(lk)
    _last = (lk, found)
    return found


_last: tuple | None = None


def _plan(lk: Any) -> Plan | None:
    if isinstance(lk, SplitKernel) or getattr(lk, "checks", None) is not None or lk.global_size or lk.local_size:
        return None
    if lk.core_split is not None and not (isinstance(lk.core_split, int) and lk.core_split == 1):
        return None
    uops = lk.uops
    at = next((i for i, u in enumerate(uops) if u.op in (Ops.RANGE, Ops.IF, Ops.STORE, Ops.BARRIER)), None)
    if at is None or uops[at].op is not Ops.RANGE or uops[at].arg[1] != "reduce":
        return None
    if any(u.op not in _VALUES for u in uops[:at]):
        return None
    rng = uops[at]
    end = next((j for j in range(at + 1, len(uops)) if uops[j].op is Ops.ENDRANGE and uops[j].src[0] is rng), None)
    if end is None:
        return None
    body = uops[at + 1:end]
    if not body or any(u.op not in _BODY for u in body):
        return None
    accs: list[tuple[UOp, Ops, bool]] = []
    updates = set()
    for u in body:
        if u.op is not Ops.ASSIGN:
            continue
        acc, val = u.src
        if acc.op is not Ops.DEFINE_ACC or any(a is acc for a, _, _ in accs) or val.op not in _UPDATES:
            return None
        if val.src.count(acc) != 1 or (val.op is Ops.MULACC and val.src[2] is not acc):
            return None
        if acc.dtype.scalar() == dtypes.bool or acc.src[0].op is not Ops.CONST:
            return None
        accs.append((acc, _UPDATES[val.op], val.op is not Ops.MULACC and val.src[0] is acc))
        updates.add(val)
    if not accs:
        return None
    acc_set = {a for a, _, _ in accs}
    for u in body:  # an accumulator is read by its update alone
        if u.op is not Ops.ASSIGN and u not in updates and any(s in acc_set for s in u.src):
            return None
    inside = set(body) | {rng}
    if any(s in inside for u in uops[end + 1:] for s in u.src):  # a value of the loop used after it
        return None
    if any(s in inside for u in uops[:at] for s in u.src):
        return None
    start, stop = rng.src
    if not (_symbolic(start) and _symbolic(stop)):
        return None
    # P and a piece's cost, over the kernel's vars (the runtime evaluates them per launch)
    ext = UOp(Ops.MAX, dtypes.int64, (UOp(Ops.SUB, dtypes.int64, (stop, start)), _c(0)))
    parts = _min(_c(PARTS), UOp(Ops.MAX, dtypes.int64, (UOp(Ops.IDIV, dtypes.int64, (ext, _c(CHUNK))), _c(1))))
    per = len([u for u in body if u.op in ALU | {Ops.LOAD, Ops.CAST, Ops.BITCAST}]) or 1
    cost = UOp(Ops.MUL, dtypes.int64, (UOp(Ops.IDIV, dtypes.int64, (ext, parts)), _c(per))) if not \
        (stop.op is Ops.CONST and start.op is Ops.CONST) else None
    if cost is None:  # a constant extent: constants the runtime compares at once
        n = max(0, stop.arg - start.arg)
        p = min(PARTS, max(1, n // CHUNK))
        parts, cost = p, max(1, n // p * per)
    return Plan(at, end, tuple(accs), parts, cost)


def _symbolic(u: UOp) -> bool:
    """Whether `u` is a function of the kernel's own vars and constants (the runtime can evaluate it)."""
    return all(x.op in (Ops.CONST, Ops.VAR) or x.op in _SYM_ALU for x in u.toposort()) and \
        not any(x.op is Ops.VAR and x.arg[0] in ("core_start", "core_end") for x in u.toposort())


def _c(v: int) -> UOp:
    return UOp.const(dtypes.int64, v)


def _min(a: UOp, b: UOp) -> UOp:
    return UOp(Ops.WHERE, dtypes.int64, (UOp(Ops.CMPLT, dtypes.bool, (a, b)), a, b))


def _slot_elems(dt: Any) -> int:
    """Scalar elements between two slots of an accumulator of dtype dt: one line, or the vector's bytes rounded up."""
    nbytes = -(-dt.nbytes // LINE) * LINE
    return nbytes // dt.scalar().itemsize


def rewrite(lk: Any, p: Plan) -> SplitKernel:
    """`lk` as the two stages (module docstring)."""
    with no_sites():
        return _rewrite(lk, p)


def _rewrite(lk: Any, p: Plan) -> SplitKernel:
    uops, out = lk.uops, []
    seen: set = set()

    def put(u: UOp) -> UOp:
        """Append u and whatever it is built from that is not in the list yet (constants are rendered inline)."""
        for x in u.toposort():
            if x not in seen and x.op is not Ops.CONST:
                seen.add(x)
                out.append(x)
        return u

    def alu(op: Ops, dt: Any, *src: UOp) -> UOp:
        return put(UOp(op, dt, src))

    rng = uops[p.at]
    accs = {a for a, _, _ in p.accs}
    i64 = dtypes.int64
    old_split = {u for u in uops if u.op is Ops.VAR and u.arg[0] in ("core_start", "core_end")}
    for u in uops[:p.at]:  # the values before the loop, less the accumulators it updates and the old split
        if u not in accs and u not in old_split:
            put(u)
    cs = put(UOp(Ops.VAR, i64, (), ("core_start", -1, PARTS)))
    ce = put(UOp(Ops.VAR, i64, (), ("core_end", -1, PARTS)))
    scratch = put(UOp(Ops.VAR, i64, (), (SCRATCH_VAR, 0, 2**63 - 1)))
    start, stop = rng.src
    ext = alu(Ops.MAX, i64, alu(Ops.SUB, i64, stop, start), _c(0))
    parts = put(_min(_c(PARTS), UOp(Ops.MAX, i64, (UOp(Ops.IDIV, i64, (ext, _c(CHUNK))), _c(1)))))
    q = alu(Ops.IDIV, i64, ext, parts)
    rem = alu(Ops.MOD, i64, ext, parts)
    slots, region, regions = {}, 0, []
    for j, (a, _, _) in enumerate(p.accs):
        per = _slot_elems(a.dtype)
        buf = put(UOp(Ops.PARAM, a.dtype.scalar(), (_c(PARTS * per),), (-1 - j, f"{SCRATCH_VAR}{j}", True)))
        slots[a] = (buf, per, region)
        regions.append((buf.arg[1], region))
        region += PARTS * per * a.dtype.scalar().itemsize
    # stage 1: piece pi of [core_start, core_end)
    top = max(u.arg[0] for u in uops if u.op is Ops.RANGE) + 1
    pi = put(UOp(Ops.RANGE, i64, (cs, ce), (top, "loop")))
    lo = alu(Ops.ADD, i64, alu(Ops.ADD, i64, start, alu(Ops.MUL, i64, pi, q)), put(_min(pi, rem)))
    hi = alu(Ops.ADD, i64, alu(Ops.ADD, i64, lo, q), alu(Ops.CAST, i64, alu(Ops.CMPLT, dtypes.bool, pi, rem)))
    hints = _vector_hints(p.accs)  # a loop LLVM vectorizes at the width given, else the walk's split accumulators
    piece = UOp(Ops.RANGE, rng.dtype, (lo, hi), (rng.arg[0], "loop") if hints else rng.arg)
    for a, _, _ in p.accs:
        out.append(a)  # each piece's accumulators start from their initial values
        seen.add(a)
    sub = {rng: piece}
    out.append(piece)
    for u in uops[p.at + 1:p.end + 1]:
        nu = u.replace(src=tuple(sub.get(s, s) for s in u.src)) if any(s in sub for s in u.src) else u
        sub[u] = nu
        out.append(nu)
        seen.add(nu)
    for a, _, _ in p.accs:
        buf, per, _ = slots[a]
        idx = alu(Ops.MUL, i64, pi, _c(per))
        out.append(UOp(Ops.STORE, dtypes.void, (put(UOp(Ops.INDEX, a.dtype.scalar(), (buf, idx))), a)))
    out.append(UOp(Ops.ENDRANGE, dtypes.void, (pi,)))
    # stage 2: on one thread (no scratch given: the stack's) or in the call after every piece (core_start < 0)
    whole = alu(Ops.OR, dtypes.bool, alu(Ops.CMPEQ, dtypes.bool, scratch, _c(0)),
                alu(Ops.CMPLT, dtypes.bool, cs, _c(0)))
    cond = UOp(Ops.IF, dtypes.void, (whole,))
    out.append(cond)
    k = UOp(Ops.RANGE, i64, (_c(0), parts), (top + 1, "loop"))
    total = {}
    ids = 1 + max(u.arg for u in uops if u.op is Ops.DEFINE_ACC)
    for j, (a, _, _) in enumerate(p.accs):
        total[a] = put(UOp(Ops.DEFINE_ACC, a.dtype, a.src, ids + j))
    put(k)
    for a, op, first in p.accs:
        buf, per, _ = slots[a]
        part = put(UOp(Ops.LOAD, a.dtype, (put(UOp(Ops.INDEX, a.dtype.scalar(), (buf, alu(Ops.MUL, i64, k, _c(per))))),)))
        t = total[a]
        upd = alu(op, a.dtype, *((t, part) if first else (part, t)))
        out.append(UOp(Ops.ASSIGN, a.dtype, (t, upd)))
    out.append(UOp(Ops.ENDRANGE, dtypes.void, (k,)))
    # the rest of the kernel, its accumulators read from the totals; a split of 1 is its one iteration
    sub = dict(total)
    for v in old_split:
        sub[v] = _c(0) if v.arg[0] == "core_start" else _c(1)
    for u in uops[p.end + 1:]:
        nu = u.replace(src=tuple(sub.get(s, s) for s in u.src)) if any(s in sub for s in u.src) else u
        sub[u] = nu
        if nu.op is not Ops.CONST and nu not in seen:
            seen.add(nu)
            out.append(nu)
    out.append(UOp(Ops.ENDIF, dtypes.void, (cond,)))
    fields = {f.name: getattr(lk, f.name) for f in dataclasses.fields(LinearKernel)}
    fields.update(uops=out, core_split=p.parts, scratch_bytes=region, regions=tuple(regions),
                  loop_hints=((piece, hints),) if hints else ())
    return SplitKernel(**fields)


def _vector_hints(accs) -> tuple[str, ...]:
    """The piece loop's vector width: one full vector register of the accumulator's type, 4 interleaved (LLVM's own
    choice on AVX-512 hosts is 256-bit vectors: a 16M float32 piece ran ~1.3x the library kernel's 16-lane loop)."""
    size = min(a.dtype.itemsize for a, _, _ in accs)
    if any(a.dtype.count > 1 or (op is Ops.MAX and a.dtype.is_float) for a, op, _ in accs):
        return ()  # a float max (compare and select) is no reduction LLVM vectorizes without `nnan`
    lanes = max(1, (64 if "avx512f" in hostinfo.cpu_flags() else 32) // size)
    return (f'!{{!"llvm.loop.vectorize.width", i32 {lanes}}}', '!{!"llvm.loop.interleave.count", i32 4}')


def scratch_bytes(p: Plan) -> int:
    """Bytes of scratch the pieces of `p` need (each accumulator's PARTS slots, one line or more each)."""
    return sum(PARTS * _slot_elems(a.dtype) * a.dtype.scalar().itemsize for a, _, _ in p.accs)


def describe(p: Plan, lk: Any) -> str:
    """The opts line `devicekit inspect` and the ProgramSpec's meta show for the split."""
    n = p.parts if isinstance(p.parts, int) else f"min({PARTS}, extent // {CHUNK})"
    return f"split reduce range {lk.uops[p.at].arg[0]} across threads: {n} pieces, combined in order"
