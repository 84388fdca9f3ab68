"""The kernels framework authors need, built with ir.KernelBuilder. Each returns a verified ir.Kernel.

Shapes are vars (one compiled program serves every size) except matmul and mlp, whose tile sizes must divide the
shape; they take ints. Reductions accumulate `vec` lanes at a time (independent accumulators a backend can keep in
one SIMD register), then fold the lanes: the summation order differs from numpy's, within float tolerance.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from . import ir
from .ir import dtypes
from .ir.dtypes import DType
from .ir.uop import UOp
from .kernels_matmul import PANEL_GROUP_BYTES, PANELS_PER_TILE, _panel_group, matmul, mlp_layer, pack_b  # noqa: F401
from .kernels_target import _capabilities, _check_dims, _default_target, _pick_tile, _register_lanes  # noqa: F401
from .render.renderer import Capabilities

_EXPR_FUNCS = {"exp2": ir.exp2, "log2": ir.log2, "sqrt": ir.sqrt, "sin": ir.sin, "exp": ir.exp, "log": ir.log,
               "where": ir.where, "maximum": ir.maximum, "minimum": ir.minimum, "recip": ir.recip, "trunc": ir.trunc}

_REDUCE = {"sum": "sum", "max": "max", "prod": "prod"}


def elementwise(expr: str | Callable[..., UOp], inputs: tuple[str, ...] | None = None, dtype: DType = dtypes.float32,
                out_dtype: DType | None = None, name: str = "elementwise") -> ir.Kernel:
    """out[i] = expr(inputs[i]...) for i < n. `expr` is a python expression over the input names (with exp2, log2,
    sqrt, sin, exp, log, where, maximum, minimum) or a callable taking one value per input."""
    if callable(expr):
        names = tuple(inputs or inspect.signature(expr).parameters)
        fn = expr
    else:
        code = compile(expr, "<elementwise>", "eval")
        names = tuple(inputs or sorted(n for n in code.co_names if n not in _EXPR_FUNCS))
        def fn(*vals: UOp) -> UOp:
            return eval(code, {"__builtins__": {}, **_EXPR_FUNCS}, dict(zip(names, vals)))
    if not names:
        raise ValueError("elementwise kernel needs at least one input")
    k = ir.KernelBuilder(name)
    n = k.var("n", 1)
    bufs = [k.param(x, dtype, n) for x in names]
    out = k.param("out", out_dtype or dtype, n, writable=True)
    i = k.range(n, "global")
    val = fn(*(b[i] for b in bufs))
    if not isinstance(val, UOp):
        raise ir.KernelError(f"elementwise expression must use its inputs, got {val!r}")
    out[i] = val if val.dtype == out.dtype else val.cast(out.dtype)
    return k.build()


def _fold_lanes(v: UOp, op: str) -> UOp:
    lanes = [v.gep(c) for c in range(v.dtype.count)]
    while len(lanes) > 1:  # tree fold: lanes (0,1), (2,3), ...
        pairs = [(lanes[j], lanes[j + 1]) for j in range(0, len(lanes) - 1, 2)]
        nxt = [a + b if op == "sum" else a * b if op == "prod" else ir.maximum(a, b) for a, b in pairs]
        lanes = nxt + ([lanes[-1]] if len(lanes) % 2 else [])
    return lanes[0]


def _row_reduce(k: ir.KernelBuilder, load: Callable[[UOp], UOp], n: UOp, op: str, vec: int, dtype: DType) -> UOp:
    """op over load(r) for r < n: `vec` accumulators over the body, then a scalar tail loop."""
    if op not in _REDUCE:
        raise ValueError(f"reduce op must be one of {sorted(_REDUCE)}, got {op!r}")
    comb = {"sum": lambda a, b: a + b, "prod": lambda a, b: a * b, "max": ir.maximum}[op]
    if vec <= 1:
        r = k.range(n, "reduce")
        return getattr(load(r), op)(r)
    body = n // vec
    r = k.range(body, "reduce")
    main = _fold_lanes(getattr(ir.vectorize(*(load(r * vec + c) for c in range(vec))), op)(r), op)
    t = k.range(n - body * vec, "reduce")
    tail = getattr(load(body * vec + t), op)(t)
    return comb(main, tail)


def reduce(op: str = "sum", dtype: DType = dtypes.float32, axis: int = 1, vec: int | None = None,
           name: str | None = None, device: Any = None) -> ir.Kernel:
    """x is an m x n row-major matrix; out = op over axis 1 (one value per row, size m) or axis 0 (per column, n).
    A full reduction of N values is axis=1 over an (parts x N/parts) view, then a sum of the parts.

    Axis 1 accumulates `vec` lanes a step (1..16; the optimizer unrolls the step into four independent accumulator
    chains): by default `_register_lanes` of `device` (None: the default device's Target), one full vector register,
    16 float32 on AVX-512 where 8 filled half of it (a 16M sum on a Rocket Lake thread: 4.6 -> 4.3 ms of CPU time,
    the hand-written AVX-512 loop's 4.3: the read bandwidth is the bound; issue 36), 8 on AVX2 and where unknown."""
    if axis not in (0, 1):
        raise ValueError(f"axis must be 0 or 1, got {axis}")
    if vec is None:
        vec = _register_lanes(_default_target(device), dtype.itemsize)
    if not isinstance(vec, int) or isinstance(vec, bool) or not 1 <= vec <= 16:
        raise ValueError(f"reduce vec must be an int in 1..16 (lanes of one vector), got {vec!r}")
    k = ir.KernelBuilder(name or f"reduce_{op}_axis{axis}")
    m, n = k.var("m", 1), k.var("n", 1)
    x = k.param("x", dtype, m * n)
    out = k.param("out", dtype, m if axis == 1 else n, writable=True)
    if axis == 1:
        i = k.range(m, "global")
        out[i] = _row_reduce(k, lambda r: x[i * n + r], n, op, vec, dtype)
    else:
        j = k.range(n, "global")
        out[j] = _row_reduce(k, lambda r: x[r * n + j], m, op, 1, dtype)
    return k.build()


def softmax(dtype: DType = dtypes.float32, vec: int | None = None, name: str = "softmax", device: Any = None
            ) -> ir.Kernel:
    """Row softmax of an m x n matrix: exp(x - max) / sum(exp(x - max)), computed in float32 for half types.

    One exp per element: a vector max over the row, then one pass that stores e = exp(x - max) in `out` (the row
    stays in L1), a vector sum of those, and one pass that scales them by 1 / sum. The exp is the cost (float32:
    `_exp_nonpositive`, 19 vector ops; a max or a sum one, the scaling two): the three-pass form computed it twice
    per element (4096 x 1024 float32 on a Rocket Lake Xeon: 6.0 -> 1.5-1.8 ms). Rows are not blocked: two or four
    rows a step, the next row's loads riding in this row's exp pass, were 15% slower in cache and no faster out of
    it (issue 36). float64 is computed in float64. `vec` lanes per step (1..16):
    by default `_register_lanes` of `device` (None: the default device's Target, as `matmul`; 16 float32 on AVX-512,
    8 on AVX2 and where the register file is unknown); each pass is a vector body and a scalar tail."""
    k = ir.KernelBuilder(name)
    m, n = k.var("m", 1), k.var("n", 1)
    x = k.param("x", dtype, m * n)
    out = k.param("out", dtype, m * n, writable=True)
    ct = dtype if dtype in (dtypes.float32, dtypes.float64) else dtypes.float32
    if vec is None:
        vec = _register_lanes(_default_target(device), ct.itemsize)
    if not isinstance(vec, int) or isinstance(vec, bool) or not 1 <= vec <= 16:
        raise ValueError(f"softmax vec must be an int in 1..16 (lanes of one vector), got {vec!r}")
    f = (lambda v: v.cast(ct)) if dtype != ct else (lambda v: v)
    g = (lambda v: v.cast(dtype)) if dtype != ct else (lambda v: v)
    i = k.range(m, "global")
    row = i * n
    mx = _row_reduce(k, lambda r: f(x[row + r]), n, "max", vec, ct)

    def each(fn: Callable[[UOp], UOp], src: Any, lo: int) -> None:
        """out[row + c] = fn(src[row + c]) for lo <= c < n: a body of `vec`-lane vectors, then a scalar tail."""
        count = n - lo
        body = count // vec
        if vec > 1:
            j = k.range(body, "loop")
            idx = [row + lo + j * vec + c for c in range(vec)]
            v = fn(ir.vectorize(*(f(src[ix]) for ix in idx)))
            for c, ix in enumerate(idx):
                out[ix] = g(v.gep(c))
        t = k.range(count - body * vec if vec > 1 else count, "loop")
        ix = row + lo + body * vec + t if vec > 1 else row + lo + t
        out[ix] = g(fn(f(src[ix])))

    def bcast(s: UOp, like: UOp) -> UOp:
        return ir.vectorize(*([s] * like.dtype.count)) if like.dtype.count > 1 else s

    each(lambda v: (_exp_nonpositive if ct == dtypes.float32 else ir.exp)(v - bcast(mx, v)), x, 0)
    inv = 1.0 / _row_reduce(k, lambda r: f(out[row + r]), n, "sum", vec, ct)
    # the row's first element first: the sum (a load of out) is read where its first use runs, so that use is in
    # the row's loop body itself and the scaling loops after it see the same value (docs/ir.md, Memory order)
    out[row] = g(f(out[row]) * inv)
    each(lambda v: v * bcast(inv, v), out, 1)
    return k.build()


# 2**f on [-0.5, 0.5], degree 5: relative-error minimax (weighted least squares), float32 coefficients; 7.6e-8
# relative (the Taylor series of degree 6 it replaces: 1.2e-7, two more ops per element)
_EXP2_TERMS = [1.0000001192092896, 0.6931469440460205, 0.24022120237350464, 0.05550713464617729,
               0.009675497189164162, 0.0013276340905576944]
# 1.5 * 2**23 + 127: t + _ROUND is round(t) + 127 + 1.5 * 2**23 for -127 <= t <= 0 (float32's ulp there is 1), and
# its bits shifted left 23 are (round(t) + 127) << 23, the float 2**round(t): the rest of the bits shift out
_ROUND = 12583039.0
_ROUND_BITS = 0x4B40007F  # the bits of _ROUND: bits(t + _ROUND) - _ROUND_BITS is round(t)


def _exp_nonpositive(d: UOp) -> UOp:
    """exp(d) for float32 d <= 0 or NaN (x - max of a row): softmax's one exp per element in 19 vector ops (the
    core's exp2 decomposition ~30, this function's first form 26: issue 36). t = d * log2(e) is clamped at -127;
    t + _ROUND rounds it and its bits are the power of two (an add and a shift; one int->float conversion gives
    round(t)), and a degree-5 polynomial gives 2**(t - round(t)). -inf and anything under 2**-126.5 give 0 (a softmax term below
    1e-38 needs no denormal); NaN propagates through the arithmetic (no select). Relative error: 4 ulp for
    -1 <= d <= 0, growing to ~65 ulp at d = -87 from the float32 rounding of d * log2(e) itself (the form it
    replaced: 3 and 63)."""
    def c(v: float | int, like: UOp) -> UOp:
        u = UOp.const(like.dtype.scalar(), v)
        return ir.vectorize(*([u] * like.dtype.count)) if like.dtype.count > 1 else u
    i32 = dtypes.int32.vec(d.dtype.count) if d.dtype.count > 1 else dtypes.int32
    t = d * c(1.4426950408889634, d)
    t = ir.where(t < c(-127.0, d), c(-127.0, d), t)  # NaN < -127 is false: a NaN stays
    bits = (t + c(_ROUND, d)).bitcast(i32)
    # t - round(t), in [-0.5, 0.5], exact; round(t) from the bits, not as (t + _ROUND) - _ROUND: a compiler that
    # reassociates floats folds that to t (WEBGPU's llvmpipe does), which left 2**round(t) alone, 25% off
    f = t - (bits - c(_ROUND_BITS, bits)).cast(d.dtype)
    p = c(_EXP2_TERMS[-1], d)
    for coef in reversed(_EXP2_TERMS[:-1]):
        p = p * f + c(coef, d)
    return p * (bits << c(23, bits)).bitcast(d.dtype)


def transpose(dtype: DType = dtypes.float32, name: str = "transpose") -> ir.Kernel:
    """out (n x m) = x (m x n) transposed."""
    k = ir.KernelBuilder(name)
    m, n = k.var("m", 1), k.var("n", 1)
    x = k.param("x", dtype, m * n)
    out = k.param("out", dtype, m * n, writable=True)
    i, j = k.range(m, "global"), k.range(n, "loop")
    out[j * m + i] = x[i * n + j]
    return k.build()


# a device whose register file is unknown: all_kernels() builds the same kernels whatever the default device is
_ANY_DEVICE = Capabilities(dtypes=frozenset(), ops=frozenset())


def all_kernels() -> dict[str, Callable[[], ir.Kernel]]:
    """Small instances of every kernel of the library, by name: what conformance suites and tests iterate. Built
    for `_ANY_DEVICE`, so each is the same kernel on every machine and device (not the default device's tiles)."""
    d = _ANY_DEVICE
    return {
        "elementwise_fma": lambda: elementwise("a * b + c"),
        "elementwise_math": lambda: elementwise("where(a < 0.0, exp2(a), sqrt(a) + sin(b))", name="ew_math"),
        "elementwise_int": lambda: elementwise("(a * 3 + b) // 2 - (a % 5)", dtype=dtypes.int32, name="ew_int"),
        "reduce_sum": lambda: reduce("sum", device=d),
        "reduce_max": lambda: reduce("max", device=d),
        "reduce_sum_axis0": lambda: reduce("sum", axis=0, device=d),
        "softmax": lambda: softmax(device=d),
        "transpose": lambda: transpose(),
        "matmul": lambda: matmul(24, 20, 16, device=d),
        "mlp_layer": lambda: mlp_layer(16, 12, 8, device=d),
        "pack_b": lambda: pack_b(16, 20),
        "matmul_panels": lambda: matmul(24, 20, 16, b_layout="panels", name="matmul_panels", device=d),
        "mlp_layer_panels": lambda: mlp_layer(16, 12, 8, tn=8, b_layout="panels", name="mlp_layer_panels",
                                               device=d),
    }


def example_inputs(name: str, seed: int = 0) -> dict[str, Any]:
    """Named numpy inputs (and var values) for each kernel of `all_kernels()`, sized to exercise tails and tiles."""
    import numpy as np
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    if name == "elementwise_fma":
        return {"a": f(1000), "b": f(1000), "c": f(1000), "n": 1000}
    if name == "elementwise_math":
        return {"a": f(777), "b": f(777), "n": 777}
    if name == "elementwise_int":
        return {"a": rng.integers(-1000, 1000, 513).astype(np.int32), "b": rng.integers(-9, 9, 513).astype(np.int32),
                "n": 513}
    if name in ("reduce_sum", "reduce_max", "reduce_sum_axis0", "softmax", "transpose"):
        return {"x": f(37, 101).reshape(-1), "m": 37, "n": 101}
    if name == "matmul":
        return {"a": f(24 * 16), "b": f(16 * 20)}
    if name == "mlp_layer":
        return {"a": f(16 * 8), "b": f(8 * 12), "bias": f(12)}
    if name == "pack_b":
        return {"b": f(16 * 20)}
    if name == "matmul_panels":  # 20 columns: two panels of 16, the second with 12 padding columns (any values)
        return {"a": f(24 * 16), "bp": f(2 * 16 * 16)}
    if name == "mlp_layer_panels":  # 12 columns: two panels of 8, 4 padding columns
        return {"a": f(16 * 8), "bp": f(2 * 8 * 8), "bias": f(12)}
    raise KeyError(name)
