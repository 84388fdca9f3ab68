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
(docs/architecture.md, WEBGPU plugin).
"""

from __future__ import annotations

import dataclasses

from devicekit.ir.dtypes import dtypes
from devicekit.ir.ops import Ops
from devicekit.ir.uop import UOp


def _isnan(x: UOp, out: list[UOp]) -> UOp:
    f = x if x.dtype.scalar() == dtypes.float32 else UOp(Ops.CAST, dtypes.float32, (x,))
    bits = UOp(Ops.BITCAST, dtypes.uint32, (f,))
    mag = UOp(Ops.AND, dtypes.uint32, (bits, UOp(Ops.CONST, dtypes.uint32, (), 0x7FFFFFFF)))
    nan = UOp(Ops.CMPLT, dtypes.bool, (UOp(Ops.CONST, dtypes.uint32, (), 0x7F800000), mag))
    for u in (f, bits, mag.src[1], mag, nan.src[0], nan):
        if u is not x:
            out.append(u)
    return nan


ZERO = UOp(Ops.VAR, dtypes.uint32, (), ("dk_zero", 0, 0))  # rendered as the uniform field dk_zero (renderer)
_ARITH = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.MULACC, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ})


def _special(u: UOp) -> bool:
    """A constant the finite-math folds treat specially: 0 (either sign), inf, NaN."""
    import math
    return u.op is Ops.CONST and (u.arg == 0 or not math.isfinite(u.arg))


def _opaque(x: UOp, out: list[UOp]) -> UOp:
    """x, read through `| dk_zero` on its bits: equal to x, but a value the compiler cannot see through."""
    f = x if x.dtype.scalar() == dtypes.float32 else UOp(Ops.CAST, dtypes.float32, (x,))
    bits = UOp(Ops.BITCAST, dtypes.uint32, (f,))
    hid = UOp(Ops.OR, dtypes.uint32, (bits, ZERO))
    back = UOp(Ops.BITCAST, dtypes.float32, (hid,))
    res = back if x.dtype.scalar() == dtypes.float32 else UOp(Ops.CAST, x.dtype, (back,))
    out += [v for v in (f, bits, ZERO, hid, back, res) if v is not x]
    return res


def _hide(src: tuple[UOp, ...], out: list[UOp]) -> tuple[UOp, ...]:
    """The operands of a float op with repeated reads and special constants made opaque (module doc)."""
    seen: set[UOp] = set()
    new = []
    for s in src:
        if s.dtype.scalar().is_float and (s in seen or _special(s)):
            new.append(_opaque(s, out))
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
    for u in uops:
        src = tuple(mapping.get(s, s) for s in u.src)
        if u.op in _ARITH and u.dtype.count == 1 and src[0].dtype.scalar().is_float:
            src = _hide(src, out)
        nu = u if src == u.src else u.replace(src=src)
        if u.op in (Ops.CMPNE, Ops.CMPEQ, Ops.MAX) and src[0].dtype.scalar().is_float and nu.dtype.count == 1:
            out.append(nu)
            a_nan = _isnan(src[0], out)
            if u.op is Ops.CMPNE:
                b_nan = _isnan(src[1], out)
                either = UOp(Ops.OR, dtypes.bool, (a_nan, b_nan))
                res = UOp(Ops.OR, dtypes.bool, (nu, either))
                out += [either, res]
            elif u.op is Ops.CMPEQ:
                ok = UOp(Ops.CMPNE, dtypes.bool, (a_nan, UOp(Ops.CONST, dtypes.bool, (), True)))
                res = UOp(Ops.AND, dtypes.bool, (nu, ok))
                out += [ok.src[1], ok, res]
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
