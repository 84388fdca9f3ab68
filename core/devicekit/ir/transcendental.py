"""exp2, log2 and sin as plain arithmetic, for renderers without them (or whose library calls don't vectorize).

Each keeps IEEE special values (NaN, +-inf, 0, denormals) and meets docs/ir.md's tolerances: range reduction to a
small interval, a short series there, and exponent arithmetic on the bits. float16/bfloat16 go through float32.
"""

from __future__ import annotations

import math
from fractions import Fraction

from .dtypes import DType, dtypes
from .ops import Ops
from .uop import UOp


def _c(like: UOp | DType, v) -> UOp:
    d = like if isinstance(like, DType) else like.dtype
    c = UOp.const(d.scalar(), v)
    return UOp(Ops.VECTORIZE, d, (c,) * d.count) if d.count > 1 else c


def _alu(op: Ops, *s: UOp) -> UOp:
    d = s[1].dtype if op is Ops.WHERE else s[0].dtype
    if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ):
        d = dtypes.bool.vec(d.count) if d.count > 1 else dtypes.bool
    return UOp(op, d, s)


def _add(a, b): return _alu(Ops.ADD, a, b)
def _sub(a, b): return _alu(Ops.SUB, a, b)
def _mul(a, b): return _alu(Ops.MUL, a, b)
def _lt(a, b): return _alu(Ops.CMPLT, a, b)
def _where(c, a, b): return _alu(Ops.WHERE, c, a, b)
def _isnan(x): return _alu(Ops.CMPNE, x, x)


def _vec(d: DType, s: DType) -> DType:
    return s.vec(d.count) if d.count > 1 else s


def _horner(x: UOp, coeffs: list[float]) -> UOp:
    """coeffs[0] + coeffs[1] x + ... (highest degree last)."""
    acc = _c(x, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = _add(_mul(acc, x), _c(x, c))
    return acc


class _F:
    """Format constants of one float type."""

    def __init__(self, d: DType):
        self.f = d
        s = d.scalar()
        if s == dtypes.float64:
            self.i, self.u, self.mbits, self.bias, self.ebits = dtypes.int64, dtypes.uint64, 52, 1023, 11
            self.terms, self.logterms, self.sinterms = 14, 11, 11  # sin: r^23/23! < 1e-18 at pi/2
        else:
            self.i, self.u, self.mbits, self.bias, self.ebits = dtypes.int32, dtypes.uint32, 23, 127, 8
            self.terms, self.logterms, self.sinterms = 8, 6, 8
        self.iv, self.uv = _vec(d, self.i), _vec(d, self.u)


def _floor_to_int(x: UOp, fm: _F) -> UOp:
    """floor(x) as an integer, for x already bounded well inside the integer range (and not NaN)."""
    t = UOp(Ops.CAST, fm.iv, (x,))
    tf = UOp(Ops.CAST, x.dtype, (t,))
    return _where(_lt(x, tf), _sub(t, _c(t, 1)), t)


def _pow2(n: UOp, fm: _F) -> UOp:
    """2**n for an integer n in the normal exponent range, built from the bits."""
    e = _add(n, _c(n, fm.bias))
    return UOp(Ops.BITCAST, fm.f, (_alu(Ops.SHL, e, _c(e, fm.mbits)),))


def exp2(x: UOp) -> UOp:
    if x.dtype.scalar() in (dtypes.float16, dtypes.bfloat16):
        return UOp(Ops.CAST, x.dtype, (exp2(UOp(Ops.CAST, _vec(x.dtype, dtypes.float32), (x,))),))
    fm = _F(x.dtype)
    hi, lo = float(fm.bias + 1), -float(fm.bias + fm.mbits + 1)
    xc = _where(_lt(x, _c(x, lo)), _c(x, lo), x)
    xc = _where(_lt(_c(x, hi), xc), _c(x, hi), xc)
    xc = _where(_isnan(xc), _c(x, 0.0), xc)
    n = _floor_to_int(_add(xc, _c(x, 0.5)), fm)
    f = _sub(xc, UOp(Ops.CAST, x.dtype, (n,)))  # in [-0.5, 0.5]
    ln2 = math.log(2)
    p = _horner(f, [ln2**k / math.factorial(k) for k in range(fm.terms)])
    n1 = _alu(Ops.SHR, n, _c(n, 1))
    n2 = _sub(n, n1)
    out = _mul(_mul(p, _pow2(n1, fm)), _pow2(n2, fm))
    return _where(_isnan(x), x, out)


def log2(x: UOp) -> UOp:
    if x.dtype.scalar() in (dtypes.float16, dtypes.bfloat16):
        return UOp(Ops.CAST, x.dtype, (log2(UOp(Ops.CAST, _vec(x.dtype, dtypes.float32), (x,))),))
    fm = _F(x.dtype)
    tiny = 2.0 ** (1 - fm.bias)
    small = _lt(x, _c(x, tiny))
    xs = _where(small, _mul(x, _c(x, 2.0 ** fm.mbits)), x)
    bits = UOp(Ops.BITCAST, fm.iv, (xs,))
    emask = (1 << fm.ebits) - 1
    e = _sub(_alu(Ops.AND, _alu(Ops.SHR, bits, _c(bits, fm.mbits)), _c(bits, emask)), _c(bits, fm.bias))
    e = _where(small, _sub(e, _c(e, fm.mbits)), e)
    mant = _alu(Ops.OR, _alu(Ops.AND, bits, _c(bits, (1 << fm.mbits) - 1)), _c(bits, fm.bias << fm.mbits))
    m = UOp(Ops.BITCAST, x.dtype, (mant,))  # [1, 2)
    big = _lt(_c(m, math.sqrt(2)), m)
    m = _where(big, _mul(m, _c(m, 0.5)), m)
    e = _where(big, _add(e, _c(e, 1)), e)
    s = _alu(Ops.FDIV, _sub(m, _c(m, 1.0)), _add(m, _c(m, 1.0)))
    s2 = _mul(s, s)
    ln_m = _mul(_mul(s, _c(s, 2.0)), _horner(s2, [1.0 / (2 * k + 1) for k in range(fm.logterms)]))
    out = _add(UOp(Ops.CAST, x.dtype, (e,)), _mul(ln_m, _c(x, 1 / math.log(2))))
    out = _where(_alu(Ops.CMPEQ, x, _c(x, 0.0)), _c(x, -math.inf), out)
    out = _where(_alu(Ops.CMPEQ, x, _c(x, math.inf)), x, out)
    return _where(_lt(x, _c(x, 0.0)), _c(x, math.nan), _where(_isnan(x), x, out))


def sin(x: UOp, wide: bool = False) -> UOp:
    """sin(x). With `wide` (the target has float64) a float32 argument is range-reduced in float64: in float32,
    k * pi is exact only while k < 2**12, and past |x| ~ 2**20 the reduced argument (then the result) is garbage."""
    if x.dtype.scalar() in (dtypes.float16, dtypes.bfloat16):
        return UOp(Ops.CAST, x.dtype, (sin(UOp(Ops.CAST, _vec(x.dtype, dtypes.float32), (x,)), wide),))
    fm = _F(x.dtype)
    finite = _alu(Ops.CMPEQ, _sub(x, x), _c(x, 0.0))  # false for NaN and inf
    if wide and fm.i == dtypes.int32:
        r, k = _reduce(UOp(Ops.CAST, _vec(x.dtype, dtypes.float64), (x,)))
        r = UOp(Ops.CAST, x.dtype, (r,))
    else:
        r, k = _reduce(x)
    r2 = _mul(r, r)
    poly = _mul(r, _horner(r2, [(-1) ** j / math.factorial(2 * j + 1) for j in range(fm.sinterms)]))
    odd = _alu(Ops.CMPNE, _alu(Ops.AND, k, _c(k, 1)), _c(k, 0))
    out = _where(odd, _mul(poly, _c(x, -1.0)), poly)
    return _where(finite, out, _c(x, math.nan))


def _reduce(x: UOp) -> tuple[UOp, UOp]:
    """(r, k) with x = k * pi + r, |r| <= pi/2 (Cody-Waite: k * part is exact for the leading parts)."""
    fm = _F(x.dtype)
    limit = 2.0 ** 30 if fm.i == dtypes.int32 else 2.0 ** 60
    xs = _where(_lt(_alu(Ops.MUL, x, x), _c(x, limit * limit)), x, _c(x, 0.0))  # past the limit: no precision
    k = _floor_to_int(_add(_mul(xs, _c(x, 1 / math.pi)), _c(x, 0.5)), fm)
    kf = UOp(Ops.CAST, x.dtype, (k,))
    r = xs
    for p in _PI_PARTS[fm.i == dtypes.int32]:
        r = _sub(r, _mul(kf, _c(x, p)))
    return r, k


# pi to 50 digits: the parts must sum to pi itself, not to math.pi (pi rounded to 53 bits): k * (pi - math.pi)
# is 2.5e-11 at x = 6.5e5, which a float64 sin near a multiple of pi shows (found by the fuzzer: 1/sin(651249))
_PI = Fraction(314159265358979323846264338327950288419716939937510, 10**50)


def _split(v: Fraction, bits: int, n: int) -> list[float]:
    """n floats summing to `v` (exactly, but for the last one's rounding): each leading part has `bits` bits, so
    k * part is exact while k has at most (53 - bits) bits."""
    parts = []
    for _ in range(n - 1):
        m, e = math.frexp(float(v))
        p = math.ldexp(math.floor(m * 2**bits) / 2**bits, e)
        parts.append(p)
        v -= Fraction(p)
    return [*parts, float(v)]


_PI_PARTS = {True: _split(_PI, 12, 4), False: _split(_PI, 26, 3)}

DECOMPOSITIONS = {Ops.EXP2: exp2, Ops.LOG2: log2, Ops.SIN: sin}
WIDE_DECOMPOSITIONS = {Ops.SIN: lambda x: sin(x, wide=True)}  # for targets that have float64
