"""Random well-formed kernels for property tests and differential fuzzing: every one is valid IR whose result is
defined (no out-of-range float->int casts, no bitcast from a float, no sin past 2**20, no reads out of bounds),
built from a seed so a failure reproduces.

`random_kernel(seed)` -> (kernel, inputs): run it on any device and compare with `assert_matches` against the
PYTHON device. Options narrow the dtypes and ops for backends that lack some.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import ir
from ..ir import dtypes
from ..ir.dtypes import DType, bf16_to_f32, from_numpy_values
from ..ir.ops import Ops
from ..ir.uop import UOp

FLOATS = (dtypes.float32, dtypes.float16, dtypes.float64, dtypes.bfloat16)
INTS = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16, dtypes.uint32,
        dtypes.uint64)
ALL_DTYPES = FLOATS + INTS + (dtypes.bool,)


def tolerance(dt: DType) -> float:
    """The relative (and absolute) tolerance a backend must meet for float results (docs/ir.md)."""
    return {"float16": 1e-2, "bfloat16": 2e-2, "float32": 1e-4, "float64": 1e-9}.get(dt.scalar().name, 0.0)


def assert_matches(got: np.ndarray, want: np.ndarray, dt: DType, what: str = "",
                   also: np.ndarray | None = None) -> None:
    """Integers and bools exactly; floats within `tolerance(dt)`, NaN where NaN, infinities with their sign.
    With `also`, an element matches when it matches `want` or `also` there (a reassociating compiler's results
    against the exact and the widened reference)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {got.shape} != {want.shape}")
    bad = _mismatches(got, want, dt)
    if also is not None:
        bad &= _mismatches(got, np.asarray(also), dt)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        if not dt.is_float:
            raise AssertionError(f"{what}: {bad.sum()} mismatches, first at [{i}]: got {got.flat[i]}, "
                                 f"want {want.flat[i]}")
        g, w = _as_f64(got, dt), _as_f64(want, dt)
        extra = "" if also is None else f" (widened: {_as_f64(np.asarray(also), dt).flat[i]!r})"
        raise AssertionError(f"{what}: {bad.sum()} of {bad.size} differ beyond {tolerance(dt)}, first at [{i}]: "
                             f"got {g.flat[i]!r}, want {w.flat[i]!r}{extra}")


def _as_f64(x: np.ndarray, dt: DType) -> np.ndarray:
    if dt.scalar() == dtypes.bfloat16 and x.dtype == np.uint16:
        x = bf16_to_f32(x)
    return x.astype(np.float64)


def _mismatches(got: np.ndarray, want: np.ndarray, dt: DType) -> np.ndarray:
    """Where got and want differ beyond what dt allows (a bool mask of got's shape)."""
    if not dt.is_float:
        return np.asarray(got != want)
    g, w = _as_f64(got, dt), _as_f64(want, dt)
    tol = tolerance(dt)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    finite = np.isfinite(g) & np.isfinite(w)
    # an infinity matches only the same infinity and a NaN only a NaN: the tolerance applies where both are finite
    # (|inf - x| <= tol * (1 + inf) would hold for any x)
    exact = (g == w) | (nan_g & nan_w)
    with np.errstate(invalid="ignore", over="ignore"):
        close = finite & (np.abs(g - w) <= tol * (1 + np.abs(w)))
    return ~(exact | close)


@dataclass
class RandomKernel:
    kernel: ir.Kernel
    inputs: dict[str, Any]
    seed: int

    def __repr__(self) -> str:
        return f"RandomKernel(seed={self.seed}, {self.kernel.name})"


class _Gen:
    def __init__(self, rng: random.Random, pool: tuple[DType, ...], ops: set[str]):
        self.rng, self.pool, self.ops = rng, pool, ops

    def const(self, dt: DType) -> Any:
        if dt.is_bool:
            return self.rng.random() < 0.5
        if dt.is_float:
            return round(self.rng.uniform(-4, 4), 3)
        lo, hi = (0, 100) if dt.is_unsigned else (-100, 100)
        return self.rng.randint(lo, hi)

    def expr(self, dt: DType, leaves: dict[DType, list[UOp]], depth: int) -> UOp:
        r = self.rng
        if depth <= 0 or r.random() < 0.25:
            if leaves.get(dt) and r.random() < 0.85:
                return r.choice(leaves[dt])
            src_dt = r.choice([d for d in leaves if leaves[d]])
            return self.convert(r.choice(leaves[src_dt]), dt)
        if dt.is_bool:
            other = r.choice(self.pool)
            if other.is_bool:
                a, b = self.expr(dt, leaves, depth - 1), self.expr(dt, leaves, depth - 1)
                return r.choice([a & b, a | b, a ^ b])
            a, b = self.expr(other, leaves, depth - 1), self.expr(other, leaves, depth - 1)
            return r.choice([a < b, a.ne(b), a.eq(b)])
        choices = ["add", "sub", "mul", "max", "where", "neg", "cast"]
        if dt.is_float:
            choices += ["fdiv", "exp2", "log2", "sqrt", "sin", "mulacc"]
        else:
            choices += ["idiv", "mod", "and", "or", "xor", "shl", "shr"]
        op = r.choice([c for c in choices if c in self.ops or c in ("cast", "where")])
        a = self.expr(dt, leaves, depth - 1)
        if op == "neg":
            return -a if not dt.is_unsigned else a ^ 1
        if op in ("exp2", "log2", "sqrt", "sin"):
            # exp2 stays finite; sin stays where docs/ir.md holds it to the tolerance (|x| <= 2**20)
            lim = {"exp2": 20.0, "sin": _sin_limit(a)}.get(op)
            arg = ir.minimum(ir.maximum(a, -lim), lim) if lim else a
            return {"exp2": ir.exp2, "log2": ir.log2, "sqrt": ir.sqrt, "sin": ir.sin}[op](arg)
        if op == "cast":
            return self.convert(self.expr(r.choice(self.pool), leaves, depth - 1), dt)
        b = self.expr(dt, leaves, depth - 1)
        if op == "where":
            return ir.where(self.expr(dtypes.bool, leaves, depth - 1), a, b)
        if op == "mulacc":
            return ir.mulacc(a, b, self.expr(dt, leaves, depth - 1))
        return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "max": lambda: ir.maximum(a, b),
                "fdiv": lambda: a / b, "idiv": lambda: a // b, "mod": lambda: a % b, "and": lambda: a & b,
                "or": lambda: a | b, "xor": lambda: a ^ b, "shl": lambda: a << b, "shr": lambda: a >> b}[op]()

    def convert(self, x: UOp, dt: DType) -> UOp:
        """A defined conversion: floats going to integers are clamped into range first; bitcasts start from integers
        only (the bits of a NaN, e.g. of a transcendental's result, are not part of the contract)."""
        if x.dtype == dt:
            return x
        src = x.dtype
        if src.is_float and dt.is_int:
            lo, hi = (0.0, 100.0) if dt.is_unsigned else (-100.0, 100.0)
            x = ir.where(x.ne(x), 0.0, ir.minimum(ir.maximum(_off_integers(x), lo), hi))
        # the draw comes first so that a seed's other choices stay what they were
        if self.rng.random() < 0.1 and src.is_int and src.itemsize == dt.itemsize and not dt.is_bool:
            return x.bitcast(dt)
        return x.cast(dt)


def _array(rng: np.random.Generator, dt: DType, n: int) -> np.ndarray:
    if dt.is_bool:
        return rng.random(n) < 0.5
    if dt.is_float:
        vals = rng.standard_normal(n) * 3
        return from_numpy_values(vals.astype(np.float32), dt) if dt == dtypes.bfloat16 else vals.astype(dt.np)
    info = np.iinfo(dt.np)
    lo, hi = max(info.min, -1000), min(info.max, 1000)
    return rng.integers(lo, hi, n, endpoint=True).astype(dt.np)


ALL_OPS = frozenset({"add", "sub", "mul", "max", "neg", "fdiv", "exp2", "log2", "sqrt", "sin", "mulacc", "idiv", "mod",
                     "and", "or", "xor", "shl", "shr"})


def random_kernel(seed: int, pool: tuple[DType, ...] = ALL_DTYPES, ops: frozenset[str] = ALL_OPS,
                  max_depth: int = 4, reduce: bool | None = None, gates: bool = True) -> RandomKernel:
    """A random kernel over 1-3 inputs: elementwise, or a row reduction (sum/max/prod) when `reduce`."""
    r = random.Random(seed)
    g = _Gen(r, pool, set(ops))
    k = ir.KernelBuilder(f"rand{seed}")
    n_val = r.choice([1, 3, 8, 31, 64, 100])
    n = k.var("n", 1, 4096)
    do_reduce = r.random() < 0.3 if reduce is None else reduce
    m_val = r.choice([1, 4, 7]) if do_reduce else 1
    m = k.var("m", 1, 64) if do_reduce else None
    in_dts = [r.choice(pool) for _ in range(r.randint(1, 3))]
    out_dt = r.choice([d for d in pool if not (do_reduce and d.is_bool)])
    size = n * m if m is not None else n
    params = [k.param(f"in{j}", d, size) for j, d in enumerate(in_dts)]
    out = k.param("out", out_dt, n, writable=True)
    i = k.range(n, "global")
    red = k.range(m, "reduce") if m is not None else None
    idx = i * m + red if m is not None else i
    leaves: dict[DType, list[UOp]] = {}
    for p in params:
        if gates and r.random() < 0.2:
            v = p.load(idx + 1, gate=(idx + 1) < size, default=g.const(p.dtype))
        else:
            v = p[idx]
        leaves.setdefault(p.dtype, []).append(v)
    val = g.expr(out_dt, leaves, r.randint(1, max_depth))
    if do_reduce:
        op = r.choice(["sum", "max", "prod"] if out_dt.is_int else ["sum", "max"])
        if red not in _ranges_of(val):
            val = val + g.convert(params[0][idx], out_dt)
        val = getattr(val, op)(red)
    out[i] = val
    kern = k.build()
    nrng = np.random.default_rng(seed)
    inputs: dict[str, Any] = {f"in{j}": _array(nrng, d, n_val * m_val) for j, d in enumerate(in_dts)}
    inputs["n"] = n_val
    if m is not None:
        inputs["m"] = m_val
    return RandomKernel(kern, inputs, seed)


def _ranges_of(u: UOp) -> set[UOp]:
    from ..ir.ops import Ops
    return {x for x in u.toposort() if x.op is Ops.RANGE}


_ROUNDED_OPS = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.FDIV})


def _off_integers(x: UOp) -> UOp:
    """A transcendental's result moved half a unit before it is truncated: exp2(log2(208.0)) is 208 or 207.99999999999997
    within the tolerance, and truncation would turn that ulp into a whole unit (wide seed 2000193; base seed 3020190: sin(-1.5709) is -1.0 or -0.99999994)."""
    return x + 0.5 if any(u.op in _ROUNDED_OPS for u in x.toposort()) else x


def _sin_limit(arg: UOp) -> float:
    """How far sin's argument may reach: 2**20 (docs/ir.md's contract), but 4 when it holds a rounded op's result,
    whose 1-ulp freedom a large argument turns into a visible one (sin(174564 * sin(746) + 746): 0.950 or 0.945,
    base seed 3024406)."""
    return 4.0 if any(u.op in _ROUNDED_OPS for u in arg.toposort()) else 2.0 ** 20
