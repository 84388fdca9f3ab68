"""NaN-exact float comparisons for WGSL: WGSL lets implementations assume no NaN or infinity at run time (its finite
math assumption), and they do: lavapipe folds `x != x` to false and may turn `select(a, b, a < b)` into a max that
drops a NaN. The IR's comparisons are IEEE's (docs/ir.md), so before rendering, each float CMPNE / CMPEQ / MAX of the
linear form is rewritten with an integer NaN test on the bits, which no float assumption can fold:

    isnan(x)     = (bitcast<u32>(f32(x)) & 0x7fffffff) > 0x7f800000
    a != b       -> (a != b) | isnan(a) | isnan(b)
    a == b       -> (a == b) & !isnan(a)            (a NaN b makes a == b false unless folded, and then a is b)
    max(a, b)    -> where(isnan(a), a, max(a, b))   (a NaN in a propagates, docs/ir.md)

The same assumption folds arithmetic: `x - x` -> 0 and `x * 0` -> 0 even for an infinite or NaN x, `x + 0` -> x even
for -0. So where a float op reads one value twice, or a constant 0, inf or NaN, the second read goes through an
integer OR with `dk_zero`, a uniform that is always 0 but unknown to the compiler (`opaque`): the op is then
computed, not folded. Folds across longer chains (`(x + y) - x`) are not reached: WEBGPU's documented limit
(docs/decisions.md, WEBGPU plugin).
"""

from __future__ import annotations

import dataclasses

from devicekit.ir.dtypes import dtypes
from devicekit.ir.ops import Ops
from devicekit.ir.uop import UOp


def _dt(base, n: int):
    return base if n == 1 else base.vec(n)


def _const(dt, value, n: int, out: list[UOp]) -> UOp:
    """A constant of dt, broadcast to n lanes (vector constants are VECTORIZEs of scalar CONSTs)."""
    c = UOp(Ops.CONST, dt, (), value)
    out.append(c)
    if n == 1:
        return c
    v = UOp(Ops.VECTORIZE, dt.vec(n), (c,) * n)
    out.append(v)
    return v


def _f32(x: UOp, out: list[UOp]) -> UOp:
    if x.dtype.scalar() == dtypes.float32:
        return x
    f = UOp(Ops.CAST, _dt(dtypes.float32, x.dtype.count), (x,))
    out.append(f)
    return f


def _isnan(x: UOp, out: list[UOp]) -> UOp:
    n = x.dtype.count
    bits = UOp(Ops.BITCAST, _dt(dtypes.uint32, n), (_f32(x, out),))
    out.append(bits)
    mag = UOp(Ops.AND, bits.dtype, (bits, _const(dtypes.uint32, 0x7FFFFFFF, n, out)))
    out.append(mag)
    nan = UOp(Ops.CMPLT, _dt(dtypes.bool, n), (_const(dtypes.uint32, 0x7F800000, n, out), mag))
    out.append(nan)
    return nan


ZERO = UOp(Ops.VAR, dtypes.uint32, (), ("dk_zero", 0, 0))  # rendered as the uniform field dk_zero (renderer)
_ARITH = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.MULACC, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ})


def _special(u: UOp) -> bool:
    """A constant the finite-math folds treat specially: 0 (either sign), inf, NaN (or a vector of them)."""
    import math
    if u.op is Ops.VECTORIZE:
        return any(_special(x) for x in u.src)
    return u.op is Ops.CONST and (u.arg == 0 or not math.isfinite(u.arg))


def _opaque(x: UOp, out: list[UOp], site: int = 1) -> UOp:
    """x, read through `| (dk_zero * site)` on its bits: equal to x, but a value the compiler cannot see through.
    Each read site has its own multiplier, so two opaque reads of one value are not one expression to the compiler
    (fuzz seed 60149: `(v * v' + 0) - v * v'` with both v' the same `v | dk_zero` was cancelled to 0 for a NaN v)."""
    n = x.dtype.count
    f = _f32(x, out)
    bits = UOp(Ops.BITCAST, _dt(dtypes.uint32, n), (f,))
    out.append(bits)
    z: UOp = ZERO
    out.append(ZERO)
    if site > 1:
        k = UOp(Ops.CONST, dtypes.uint32, (), site)
        z = UOp(Ops.MUL, dtypes.uint32, (ZERO, k))
        out += [k, z]
    zero = z if n == 1 else UOp(Ops.VECTORIZE, dtypes.uint32.vec(n), (z,) * n)
    hid = UOp(Ops.OR, bits.dtype, (bits, zero))
    back = UOp(Ops.BITCAST, f.dtype, (hid,))
    out += [zero, hid, back] if n > 1 else [hid, back]
    if f is x:
        return back
    res = UOp(Ops.CAST, x.dtype, (back,))
    out.append(res)
    return res


def _hide(src: tuple[UOp, ...], out: list[UOp], sites: list[int]) -> tuple[UOp, ...]:
    """The operands of a float op with repeated reads and special constants made opaque (module doc); `sites`
    counts the opaque reads of the kernel (each gets its own multiplier)."""
    seen: set[UOp] = set()
    new = []
    for s in src:
        if s.dtype.scalar().is_float and (s in seen or _special(s)):
            sites[0] += 1
            new.append(_opaque(s, out, sites[0]))
        else:
            new.append(s)
        seen.add(s)
    return tuple(new)


def rewrite(lk):
    """`lk` with its float comparisons and maxes NaN-exact (see the module doc); `lk` itself when it has none."""
    uops = list(lk.uops)
    if not any(u.op in _ARITH and u.src[0].dtype.scalar().is_float for u in uops):
        return lk
    out: list[UOp] = []
    mapping: dict[UOp, UOp] = {}
    sites = [0]
    for u in uops:
        src = tuple(mapping.get(s, s) for s in u.src)
        if u.op in _ARITH and src[0].dtype.scalar().is_float:
            src = _hide(src, out, sites)
        nu = u if src == u.src else u.replace(src=src)
        if u.op in (Ops.CMPNE, Ops.CMPEQ, Ops.MAX) and src[0].dtype.scalar().is_float:
            out.append(nu)
            a_nan = _isnan(src[0], out)
            b = a_nan.dtype
            if u.op is Ops.CMPNE:
                b_nan = _isnan(src[1], out)
                either = UOp(Ops.OR, b, (a_nan, b_nan))
                res = UOp(Ops.OR, b, (nu, either))
                out += [either, res]
            elif u.op is Ops.CMPEQ:
                ok = UOp(Ops.CMPNE, b, (a_nan, _const(dtypes.bool, True, b.count, out)))
                res = UOp(Ops.AND, b, (nu, ok))
                out += [ok, res]
            else:
                res = UOp(Ops.WHERE, nu.dtype, (a_nan, src[0], nu))
                out.append(res)
            mapping[u] = res
        else:
            if nu is not u:
                mapping[u] = nu
            out.append(nu)
    if dataclasses.is_dataclass(lk):
        return dataclasses.replace(lk, uops=out)
    import copy
    new = copy.copy(lk)
    new.uops = out
    return new
