"""Lowering passes on the kernel graph: unroll expansion, bfloat16 handling, decomposition, constant folding.

Each pass is a graph rewrite; `linearize.lower` runs them in order, then schedules the result.
"""

from __future__ import annotations

import itertools

import numpy as np

from . import semantics
from .analysis import free_ranges
from .bounds import is_record
from .dtypes import DType, dtypes, f32_to_bf16
from .ops import ALU, COMPARE, Ops
from .order import is_ordered_load, stmt_index
from .rewrite import graph_rewrite, substitute
from .transcendental import DECOMPOSITIONS, WIDE_DECOMPOSITIONS
from .uop import KernelError, UOp, make_alu


def combine(op: Ops, a: UOp, b: UOp) -> UOp:
    return UOp(op, a.dtype, (a, b))


# ---- unroll ---------------------------------------------------------------------------------------------------------

def expand_unroll(sink: UOp) -> UOp:
    """Unroll ranges disappear: a reduce over one becomes a chain of its lanes, a store in one is repeated."""
    def reduce_unroll(u: UOp) -> UOp | None:
        if u.op is not Ops.REDUCE:
            return None
        unr = [r for r in u.src[1:] if r.arg[1] == "unroll"]
        if not unr:
            return None
        r, rest = unr[0], tuple(x for x in u.src[1:] if x is not unr[0])
        lanes = [substitute(u.src[0], {r: UOp.const(dtypes.index, c)}) for c in range(r.src[0].arg)]
        acc = lanes[0]
        if u.arg is Ops.MAX and u.dtype.scalar().is_float:
            # start from the identity like every reduction: max(-inf, NaN) is -inf, so a NaN lane is skipped
            # (docs/ir.md); chained from lane 0, a NaN there would propagate
            ident = semantics.identity(Ops.MAX, u.dtype)
            acc = combine(Ops.MAX, UOp.const(u.dtype, ident) if u.dtype.count == 1 else _vconst(u.dtype, ident), acc)
        for x in lanes[1:]:
            acc = combine(u.arg, acc, x)
        return UOp(Ops.REDUCE, u.dtype, (acc, *rest), u.arg) if rest else acc

    sink = graph_rewrite(sink, reduce_unroll)
    free = free_ranges(sink.toposort())
    stmts: list[UOp] = []
    for st in sink.src:
        unr = sorted((r for r in free[st] if r.arg[1] == "unroll"), key=lambda r: r.arg[0])
        if not unr:
            stmts.append(st)
            continue
        for n, vals in enumerate(itertools.product(*(range(r.src[0].arg) for r in unr))):
            s = substitute(st, {r: UOp.const(dtypes.index, v) for r, v in zip(unr, vals)})
            stmts.append(s.replace(arg=(st.arg, n)))
    return sink.replace(src=tuple(stmts))


# ---- float16 / bfloat16 ---------------------------------------------------------------------------------------------

_HALF = (dtypes.float16, dtypes.bfloat16)


def promote_half(sink: UOp) -> UOp:
    """bfloat16 arithmetic runs in float32, rounded after each op; half/bfloat16 reductions accumulate in float32."""
    f32 = dtypes.float32

    def to32(x: UOp) -> UOp:
        return UOp(Ops.CAST, f32.vec(x.dtype.count) if x.dtype.count > 1 else f32, (x,))

    def fn(u: UOp) -> UOp | None:
        if u.op is Ops.REDUCE and u.dtype.scalar() in _HALF:
            x = to32(u.src[0])
            return UOp(Ops.CAST, u.dtype, (UOp(Ops.REDUCE, x.dtype, (x, *u.src[1:]), u.arg),))
        if u.op in ALU and u.op is not Ops.WHERE and any(s.dtype.scalar() == dtypes.bfloat16 for s in u.src):
            srcs = tuple(to32(s) if s.dtype.scalar() == dtypes.bfloat16 else s for s in u.src)
            out = UOp(u.op, u.dtype if u.op in COMPARE else to32(u).dtype, srcs)
            return out if u.op in COMPARE else UOp(Ops.CAST, u.dtype, (out,))
        if u.op is Ops.CAST and u.src[0].dtype.scalar() == dtypes.bfloat16 and u.dtype.scalar() not in (f32, dtypes.bfloat16):
            return UOp(Ops.CAST, u.dtype, (to32(u.src[0]),))
        if u.op is Ops.CAST and u.dtype.scalar() == dtypes.bfloat16 and u.src[0].dtype.scalar() != f32:
            return UOp(Ops.CAST, u.dtype, (to32(u.src[0]),))
        return None

    return graph_rewrite(sink, fn)


def emulate_bf16(sink: UOp) -> UOp:
    """For renderers without bfloat16: values live as uint16 bits; conversions are integer code (round to nearest even)."""
    u16, u32, f32 = dtypes.uint16, dtypes.uint32, dtypes.float32

    def bits_to_f32(b: UOp) -> UOp:
        return UOp(Ops.BITCAST, f32, (make_alu(Ops.SHL, (UOp(Ops.CAST, u32, (b,)), UOp.const(u32, 16))),))

    def f32_to_bits(f: UOp) -> UOp:
        u = UOp(Ops.BITCAST, u32, (f,))
        hi = make_alu(Ops.SHR, (u, UOp.const(u32, 16)))
        rnd = make_alu(Ops.ADD, (make_alu(Ops.ADD, (u, UOp.const(u32, 0x7FFF))), make_alu(Ops.AND, (hi, UOp.const(u32, 1)))))
        r = make_alu(Ops.SHR, (rnd, UOp.const(u32, 16)))
        nan = make_alu(Ops.CMPNE, (f, f))
        r = make_alu(Ops.WHERE, (nan, make_alu(Ops.OR, (hi, UOp.const(u32, 0x40))), r))
        return UOp(Ops.CAST, u16, (r,))

    return _bf16_pass(sink, bits_to_f32, f32_to_bits)


def _bf16_pass(sink: UOp, bits_to_f32, f32_to_bits) -> UOp:
    u16 = dtypes.uint16
    memo: dict[UOp, UOp] = {}
    for u in sink.toposort():
        src = tuple(memo[s] for s in u.src)
        d = u.dtype
        if d.count > 1 and d.scalar() == dtypes.bfloat16:
            raise KernelError("bfloat16 vectors need a renderer with native bfloat16", u)
        was_bf16 = [s.dtype == dtypes.bfloat16 for s in u.src]
        if u.op is Ops.CAST and was_bf16[0]:
            f = bits_to_f32(src[0])
            nu = f if d == dtypes.float32 else UOp(Ops.CAST, d, (f,))
        elif u.op is Ops.CAST and d == dtypes.bfloat16:
            x = src[0] if src[0].dtype == dtypes.float32 else UOp(Ops.CAST, dtypes.float32, (src[0],))
            nu = f32_to_bits(x)
        elif u.op is Ops.CONST and d == dtypes.bfloat16:
            nu = UOp.const(u16, int(f32_to_bf16(np.array([u.arg], np.float32))[0]))
        elif u.op is Ops.BITCAST and d == dtypes.bfloat16:
            nu = src[0] if src[0].dtype == u16 else UOp(Ops.BITCAST, u16, src)
        elif u.op is Ops.BITCAST and was_bf16[0]:
            nu = src[0] if d == u16 else UOp(Ops.BITCAST, d, src)
        elif d == dtypes.bfloat16:
            nu = UOp(u.op, u16, src, u.arg)
        else:
            nu = u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=src)
        memo[u] = nu
    return memo[sink]


# ---- decomposition of ops a renderer lacks ---------------------------------------------------------------------------

def decompose(sink: UOp, ops: frozenset[Ops], renderer: str = "this renderer", wide: bool = False,
              stable: set[UOp] | None = None) -> UOp:
    """Rewrite the ALU ops a renderer lacks (`wide`: it has float64, which the sin decomposition then uses).
    A float16 MULACC is always split into MUL + ADD: the reference rounds the product to float16 before the add, and
    C's excess precision (`_Float16` computed in float), CUDA's half-via-float and hardware fma would each round once
    instead (docs/ir.md, mulacc). `stable`: graph_rewrite's, shared by calls with the same ops and wide."""
    def fn(u: UOp) -> UOp | None:
        if u.op not in ALU or (u.op in ops and not (u.op is Ops.MULACC and u.dtype.scalar() == dtypes.float16)):
            return None
        s, d = u.src, u.dtype
        if u.op is Ops.MULACC:
            return UOp(Ops.ADD, d, (UOp(Ops.MUL, d, s[:2]), s[2]))
        if u.op is Ops.MAX:
            return UOp(Ops.WHERE, d, (UOp(Ops.CMPLT, _boolv(d), s), s[1], s[0]))
        if u.op is Ops.RECIP:
            return UOp(Ops.FDIV, d, (UOp.const(d, 1.0) if d.count == 1 else _vconst(d, 1.0), s[0]))
        if u.op is Ops.CMPEQ and Ops.CMPNE in ops:
            return UOp(Ops.CMPNE, d, (UOp(Ops.CMPNE, d, s), UOp.const(dtypes.bool, True) if d.count == 1 else _vconst(d, True)))
        if u.op is Ops.NEG:
            z = s[0].dtype
            if z.scalar().is_float:
                return UOp(Ops.MUL, d, (s[0], _vconst(z, -1.0) if z.count > 1 else UOp.const(z, -1.0)))
            return UOp(Ops.SUB, d, (_vconst(z, 0) if z.count > 1 else UOp.const(z, 0), s[0]))
        if u.op is Ops.SUB and Ops.NEG in ops:
            return UOp(Ops.ADD, d, (s[0], UOp(Ops.NEG, d, (s[1],))))
        if u.op in DECOMPOSITIONS:
            return (WIDE_DECOMPOSITIONS if wide and u.op in WIDE_DECOMPOSITIONS else DECOMPOSITIONS)[u.op](s[0])
        raise KernelError(f"{renderer} does not render {u.op.name} and the core has no decomposition for it", u)
    return graph_rewrite(sink, fn, stable=stable)


def _boolv(d: DType) -> DType:
    return dtypes.bool.vec(d.count) if d.count > 1 else dtypes.bool


def _vconst(d: DType, v) -> UOp:
    c = UOp.const(d.scalar(), v)
    return UOp(Ops.VECTORIZE, d, (c,) * d.count)


# ---- constant folding and algebraic simplification -------------------------------------------------------------------

def _is_const(u: UOp, v=None) -> bool:
    """A constant, or the constant v (a bool never counts as 0 or 1)."""
    return u.op is Ops.CONST and (v is None or (u.arg == v and not isinstance(u.arg, bool)))


_SIMPLIFIED = ALU | {Ops.CAST}  # the ops simplify may rewrite: any other node is left at once


def simplify(sink: UOp) -> UOp:
    return graph_rewrite(sink, simplify_step)


def simplify_step(u: UOp) -> UOp | None:
    """simplify's rewrite of one node (None: it stays); a function of the node alone."""
    if u.op not in _SIMPLIFIED:
        return None
    s = u.src
    if u.op in ALU and u.dtype.count == 1 and s and all(x.op is Ops.CONST for x in s):
        arrs = [semantics.const_array(x.arg, x.dtype) for x in s]
        val = semantics.alu(u.op, u.dtype, *arrs)
        return UOp.const(u.dtype, val.item())
    if u.op is Ops.CAST and s[0].op is Ops.CONST and u.dtype.count == 1:
        val = semantics.cast(semantics.const_array(s[0].arg, s[0].dtype), s[0].dtype, u.dtype)
        return UOp.const(u.dtype, val.item())
    if u.op is Ops.WHERE and s[0].op is Ops.CONST:
        return s[1] if s[0].arg else s[2]
    if u.dtype.count != 1 or len(s) != 2:
        return None
    a, b = s
    is_int = u.dtype.is_int
    if u.op is Ops.ADD and is_int:
        if _is_const(b, 0):
            return a
        if _is_const(a, 0):
            return b
        # constants move outward, so x + (y + 3) and (x + 3) + y both read (x + y) + 3 (ints wrap: associative)
        if a.op is Ops.CONST and b.op is not Ops.CONST:
            return UOp(Ops.ADD, u.dtype, (b, a))
        if b.op is Ops.ADD and b.src[1].op is Ops.CONST:
            return UOp(Ops.ADD, u.dtype, (UOp(Ops.ADD, u.dtype, (a, b.src[0])), b.src[1]))
        if a.op is Ops.ADD and a.src[1].op is Ops.CONST and b.op is not Ops.CONST:
            return UOp(Ops.ADD, u.dtype, (UOp(Ops.ADD, u.dtype, (a.src[0], b)), a.src[1]))
        if a.op is Ops.ADD and a.src[1].op is Ops.CONST and b.op is Ops.CONST:
            return UOp(Ops.ADD, u.dtype, (a.src[0], UOp.const(u.dtype, a.src[1].arg + b.arg)))
    if u.op is Ops.SUB and _is_const(b, 0) and is_int:
        return a
    if u.op is Ops.MUL:
        if _is_const(b, 1):
            return a
        if _is_const(a, 1):
            return b
        if is_int and (_is_const(a, 0) or _is_const(b, 0)):
            return UOp.const(u.dtype, 0)
    if u.op is Ops.IDIV and is_int and _is_const(b, 1):
        return a
    if u.op is Ops.MOD and is_int and _is_const(b, 1):
        return UOp.const(u.dtype, 0)
    return None


# ---- integer edge cases every backend must agree on -------------------------------------------------------------------

def define_int_edges(sink: UOp) -> UOp:
    """Make C's undefined integer cases defined, as the reference computes them: a shift uses its amount modulo the
    bit width; x // 0 and x % 0 are 0; INT_MIN // -1 wraps (x // -1 is -x) and x % -1 is 0. Constant divisors cost
    nothing; others get a select."""
    def fn(u: UOp) -> UOp | None:
        if u.op in (Ops.SHL, Ops.SHR) and u.arg != "masked":
            a, b = u.src
            if b.op is Ops.CONST and 0 <= b.arg < a.dtype.scalar().bits:
                return u.replace(arg="masked")
            mask = _like(b, a.dtype.scalar().bits - 1)
            return UOp(u.op, u.dtype, (a, UOp(Ops.AND, b.dtype, (b, mask))), "masked")
        if u.op in (Ops.IDIV, Ops.MOD) and u.arg != "safe":
            a, b = u.src
            if b.op is Ops.CONST and b.arg not in (0, -1):
                return u.replace(arg="safe")
            bad = UOp(Ops.CMPEQ, _boolv(b.dtype), (b, _like(b, 0)))
            if not b.dtype.is_unsigned:
                bad = UOp(Ops.OR, bad.dtype, (bad, UOp(Ops.CMPEQ, bad.dtype, (b, _like(b, -1)))))
            safe_b = UOp(Ops.WHERE, b.dtype, (bad, _like(b, 1), b))
            q = UOp(u.op, u.dtype, (a, safe_b), "safe")
            if u.op is Ops.MOD:
                edge = _like(a, 0)
            else:
                neg = UOp(Ops.SUB, a.dtype, (_like(a, 0), a))
                edge = UOp(Ops.WHERE, a.dtype, (UOp(Ops.CMPEQ, bad.dtype, (b, _like(b, 0))), _like(a, 0), neg))
            return UOp(Ops.WHERE, u.dtype, (bad, edge, q))
        return None
    return graph_rewrite(sink, fn)


def _like(u: UOp, v) -> UOp:
    return _vconst(u.dtype, v) if u.dtype.count > 1 else UOp.const(u.dtype, v)


# ---- contiguous lanes -> vector loads and stores ----------------------------------------------------------------------

VEC_WIDTHS = (2, 4, 8, 16)  # lanes group_vectors makes one vector of (ir/pack.py's copy of a: one of them)


def _split_offset(idx: UOp) -> tuple[UOp | None, int]:
    """idx as (base, constant offset); base None when idx is a constant."""
    off = 0
    while idx.op is Ops.ADD and idx.src[1].op is Ops.CONST:
        off += idx.src[1].arg
        idx = idx.src[0]
    if idx.op is Ops.CONST:
        return None, off + idx.arg
    return idx, off


def _pow2_divisor(u: UOp, memo: dict) -> int:
    """log2 of the largest power of two that divides every value of the integer expression u (capped at 16)."""
    if u in memo:
        return memo[u]
    if u.op is Ops.CONST:
        v = int(u.arg)
        r = 16 if v == 0 else min(16, (v & -v).bit_length() - 1)
    elif u.op is Ops.MUL:
        r = min(16, _pow2_divisor(u.src[0], memo) + _pow2_divisor(u.src[1], memo))
    elif u.op in (Ops.ADD, Ops.SUB):
        r = min(_pow2_divisor(u.src[0], memo), _pow2_divisor(u.src[1], memo))
    elif u.op is Ops.SHL and u.src[1].op is Ops.CONST:
        r = min(16, _pow2_divisor(u.src[0], memo) + int(u.src[1].arg))
    elif u.op is Ops.CAST:
        r = _pow2_divisor(u.src[0], memo)
    else:
        r = 0
    memo[u] = r
    return r


def _index_at(buf: UOp, base: UOp | None, off: int, gate: UOp | None = None) -> UOp:
    c = UOp.const(dtypes.index, off)
    idx = c if base is None else (base if off == 0 else UOp(Ops.ADD, dtypes.index, (base, c)))
    return UOp(Ops.INDEX, buf.dtype, (buf, idx) if gate is None else (buf, idx, gate))


def _ungated(ix: UOp) -> UOp:
    return ix if len(ix.src) == 2 else ix.replace(src=ix.src[:2])


def _lanes_contiguous(indexes: list[UOp], unaligned: bool, memo: dict) -> tuple[UOp, UOp | None, int] | None:
    """(buffer, base, first offset) when the indexes address consecutive elements of one buffer (aligned to the
    width unless the renderer takes unaligned vectors), else None."""
    n = len(indexes)
    if n not in VEC_WIDTHS or any(ix.op is not Ops.INDEX or len(ix.src) != 2 for ix in indexes):
        return None
    buf = indexes[0].src[0]
    if buf.dtype.count != 1 or any(ix.src[0] is not buf for ix in indexes):
        return None
    parts = [_split_offset(ix.src[1]) for ix in indexes]
    base, off0 = parts[0]
    if any(b is not base or o != off0 + c for c, (b, o) in enumerate(parts)):
        return None
    if not unaligned and (off0 % n or (base is not None and (1 << _pow2_divisor(base, memo)) % n)):
        return None
    return buf, base, off0


def group_vectors(sink: UOp, unaligned: bool = False) -> UOp:
    """VECTORIZE of loads of consecutive elements becomes one vector load; consecutive stores of consecutive elements
    become one vector store. Without `unaligned`, only where the first element is provably width-aligned."""
    memo: dict = {}

    def loads(u: UOp) -> UOp | None:
        if u.op is not Ops.VECTORIZE or any(s.op is not Ops.LOAD or len(s.src) != 1 for s in u.src):
            return None
        hit = _lanes_contiguous([s.src[0] for s in u.src], unaligned, memo)
        if hit is None:
            return None
        buf, base, off = hit
        return UOp(Ops.LOAD, u.dtype, (_index_at(buf, base, off),))

    sink = graph_rewrite(sink, loads)
    # a load built between two stores must see the first without the second (its own buffer), and is read where
    # the second statement was (any buffer: merged away, that statement's place in the loops is lost, and the
    # load was read inside the next statement's loops, once per iteration: memory seed 3024495): they stay apart
    read_at: set[int] = {u.arg[2] for u in sink.toposort() if is_ordered_load(u)}
    # and only stores of one loop body merge: a store moved into another statement's loops runs at other times
    free = free_ranges(sink.toposort())
    stmts, out, k = list(sink.src), [], 0
    while k < len(stmts):
        st = stmts[k]
        done = False
        # gated stores merge only where every lane has the same gate (a row of a tile past M: all its lanes or none
        # are stored); a gate per lane (a column past N) keeps them apart
        if st.op is Ops.STORE and st.src[1].dtype.count == 1 and st.src[0].op is Ops.INDEX:
            gate = st.src[0].src[2] if len(st.src[0].src) == 3 else None
            if gate is not None and is_record(st):  # a bounds-check record (a running maximum, not a store)
                out.append(st)
                k += 1
                continue
            for n in reversed(VEC_WIDTHS):
                group = stmts[k:k + n]
                if len(group) < n or any(g.op is not Ops.STORE or g.src[1].dtype.count != 1 or free[g] != free[st]
                                         or g.src[0].op is not Ops.INDEX or (g.src[0].src[2:] or (None,))[0] is not gate
                                         for g in group):
                    continue
                hit = _lanes_contiguous([_ungated(g.src[0]) for g in group], unaligned, memo)
                if hit is None:
                    continue
                buf, base, off = hit
                first, last = stmt_index(group[0]), stmt_index(group[-1])
                if any(first < b <= last for b in read_at):
                    continue
                vals = [g.src[1] for g in group]
                src0 = vals[0].src[0] if vals[0].op is Ops.GEP else None
                if src0 is not None and src0.dtype.count == n and all(
                        v.op is Ops.GEP and v.src[0] is src0 and v.arg == c for c, v in enumerate(vals)):
                    vec = src0
                else:
                    vec = UOp(Ops.VECTORIZE, vals[0].dtype.vec(n), tuple(vals))
                out.append(UOp(Ops.STORE, dtypes.void, (_index_at(buf, base, off, gate), vec), st.arg))
                k += n
                done = True
                break
        if not done:
            out.append(st)
            k += 1
    return sink.replace(src=tuple(out))
