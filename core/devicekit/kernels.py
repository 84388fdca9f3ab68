"""The kernels framework authors need, built with ir.KernelBuilder. Each returns a verified ir.Kernel.

Shapes are vars (one compiled program serves every size) except matmul and mlp, whose tile sizes must divide the
shape; they take ints. Reductions accumulate `vec` lanes at a time (independent accumulators a backend can keep in
one SIMD register), then fold the lanes: the summation order differs from numpy's, within float tolerance.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

from . import ir
from .ir import dtypes
from .ir.dtypes import DType
from .ir.optimize import tile_rows
from .ir.uop import UOp
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


def reduce(op: str = "sum", dtype: DType = dtypes.float32, axis: int = 1, vec: int = 8,
           name: str | None = None) -> ir.Kernel:
    """x is an m x n row-major matrix; out = op over axis 1 (one value per row, size m) or axis 0 (per column, n).
    A full reduction of N values is axis=1 over an (parts x N/parts) view, then a sum of the parts."""
    if axis not in (0, 1):
        raise ValueError(f"axis must be 0 or 1, got {axis}")
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
    stays in L1), a vector sum of those, and one pass that scales them by 1 / sum. The exp is the cost (the core's
    exp2 is ~30 vector ops, a max or a sum one): the three-pass form computed it twice per element (4096 x 1024
    float32 on a Rocket Lake Xeon: 6.0 -> 1.5-1.8 ms). float64 is computed in float64. `vec` lanes per step (1..16):
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


_EXP2_TERMS = [math.log(2) ** i / math.factorial(i) for i in range(7)]  # 2**f on [-0.5, 0.5]: 1.2e-7 relative


def _exp_nonpositive(d: UOp) -> UOp:
    """exp(d) for float32 d <= 0 or NaN (x - max of a row): softmax's one exp per element, ~2/3 of the core's exp2
    decomposition's ops (no overflow side, one power of two, a degree-6 series). d * log2(e) is clamped at -127,
    where 2**n's exponent bits are 0: -inf and anything under 2**-126.5 give 0 (the core's exp2 keeps denormals,
    which a softmax term below 1e-38 does not need); NaN gives NaN. Within 2 ulp of numpy's exp (float32)."""
    def c(v: float | int, like: UOp) -> UOp:
        u = UOp.const(like.dtype.scalar(), v)
        return ir.vectorize(*([u] * like.dtype.count)) if like.dtype.count > 1 else u
    i32 = dtypes.int32.vec(d.dtype.count) if d.dtype.count > 1 else dtypes.int32
    t = d * c(1.4426950408889634, d)
    t = ir.where(t < c(-127.0, d), c(-127.0, d), t)
    nan = t.ne(t)
    t0 = ir.where(nan, c(0.0, d), t)
    n = -((c(0.5, d) - t0).cast(i32))  # round(t0): 0.5 - t0 > 0, so the cast truncates down
    f = t0 - n.cast(d.dtype)
    p = c(_EXP2_TERMS[-1], d)
    for coef in reversed(_EXP2_TERMS[:-1]):
        p = p * f + c(coef, d)
    scale = ((n + c(127, n)) << c(23, n)).bitcast(d.dtype)
    return ir.where(nan, t, p * scale)


def transpose(dtype: DType = dtypes.float32, name: str = "transpose") -> ir.Kernel:
    """out (n x m) = x (m x n) transposed."""
    k = ir.KernelBuilder(name)
    m, n = k.var("m", 1), k.var("n", 1)
    x = k.param("x", dtype, m * n)
    out = k.param("out", dtype, m * n, writable=True)
    i, j = k.range(m, "global"), k.range(n, "loop")
    out[j * m + i] = x[i * n + j]
    return k.build()


def _pick_tile(size: int, want: int) -> int:
    t = max(1, min(want, size))
    while size % t:
        t -= 1
    return t


def _check_dims(what: str, **dims: int) -> None:
    for nm, v in dims.items():
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{what} {nm} must be a positive int, got {v!r}")


def _panel_width(tn: int) -> int:
    if not isinstance(tn, int) or not 1 <= tn <= 16:
        raise ValueError(f"the panel width tn must be an int in 1..16 (one vector of lanes), got {tn!r}")
    return tn


def pack_b(K: int, N: int, dtype: DType = dtypes.float32, tn: int = 16, name: str = "pack_b") -> ir.Kernel:
    """bp = b (K x N, row-major) in panels for `matmul(..., b_layout="panels", tn=tn)`: ceil(N / tn) panels of
    K x tn, panel p holding columns p*tn .. p*tn+tn-1 with each k's tn values contiguous (zeros past column N).
    A k step of the matmul then reads one contiguous vector instead of a row N floats from the last, which on a CPU
    maps every k to the same cache set (N*4 bytes apart) once N is a large power of two. Pack a weight once and
    reuse it, as BLAS libraries do; the pack of a 1024 x 1024 float32 b is a copy (~2% of the matmul)."""
    _check_dims("pack_b", K=K, N=N)
    tn = _panel_width(tn)
    panels = -(-N // tn)
    k = ir.KernelBuilder(name)
    b = k.param("b", dtype, K * N)
    bp = k.param("bp", dtype, panels * K * tn, writable=True)
    j, r, y = k.range(panels, "global"), k.range(K, "loop"), k.range(tn, "loop")
    col = j * tn + y
    bp[(j * K + r) * tn + y] = b[r * N + col] if N % tn == 0 else b.load(r * N + col, gate=col < N, default=0, unchecked=True)
    return k.build()


# column blocks (panels) of a default tile where the accumulators allow: a k step loads 2 b vectors for 2 x rows
# multiply-adds (1024^3 f32 on one Rocket Lake thread, CPU time: panels 8 x 2 12.6-13.6 ms against 16 x 1's
# 15.9-18.0, OpenBLAS 13.7-15.0; rows 8 x 2 x 16 31.6-33.3 against 16 x 16's 38)
PANELS_PER_TILE = 2
PANEL_GROUP_BYTES = 256 << 10  # b panels a thread keeps in its L2 while every row tile passes


def _panel_group(nj: int, panel_bytes: int) -> int:
    """Panels walked as one group, outermost: ~PANEL_GROUP_BYTES of b, at most 8, dividing `nj`, and leaving at least
    8 groups to split across threads (1: no groups, row tiles outermost). A group stays in a thread's L2 while every
    row tile of a passes (a is read nj / group times instead of nj), and after pack_b (split the same way) each
    thread reads the panels it packed: 1024^3 float32 on a Rocket Lake Xeon, pack + matmul 0.64-0.69x OpenBLAS
    without groups, 0.72-0.81x with 4 or 8."""
    return _pick_tile(nj, max(1, min(8, PANEL_GROUP_BYTES // max(1, panel_bytes), nj // 8)))


def _capabilities(device: Any) -> Capabilities | None:
    """The renderer Capabilities of `device=` (a Device, a Target or Capabilities); None for None."""
    if device is None:
        return None
    caps = device if isinstance(device, Capabilities) else getattr(getattr(device, "renderer", None), "capabilities",
                                                                     None)
    if not isinstance(caps, Capabilities):
        raise TypeError(f"device= takes a Device or Target (dk.device(...), dk.target(...)) or a renderer's "
                        f"Capabilities, got {type(device).__name__}")
    return caps


def _panel_rows(device: Any, tn: int, itemsize: int) -> int:
    """Rows of a panels tile whose accumulators (rows x tn lanes) fill half the device's vector registers: 4 x 16
    float32 on AVX2 (8 of its 16 ymm registers), 16 x 16 on AVX-512 (16 of 32 zmm); at least 4. 4 without a
    device, or when it does not say (`Capabilities.vector_register_bytes` 0)."""
    caps = _capabilities(device)
    return tile_rows(0 if caps is None else caps.vector_register_bytes, tn * itemsize)


def _register_lanes(device: Any, itemsize: int) -> int:
    """Lanes of `itemsize` bytes in a sixteenth of `device`'s vector register file, at most 64 bytes (one AVX-512
    register: 16 float32 from its 32 x 64 bytes; AVX2's 16 x 32 bytes and an unknown file: 32 bytes, 8); 2..16."""
    caps = _capabilities(device)
    regs = 0 if caps is None else caps.vector_register_bytes
    return max(2, min(16, min(64, regs // 16 or 32) // itemsize))


def _default_target(device: Any) -> Any:
    """`device`, or the default device's Target when it is None (what a kernel built without one most likely runs
    on: DEVICEKIT_DEVICE, else the available kind of highest priority); None when there is no usable one."""
    if device is not None:
        return device
    try:
        from .registry import get_registry
        reg = get_registry()
        return reg.target(reg.default_spec())
    except Exception:  # noqa: BLE001 - no usable default device: the kernel is built for none
        return None


def matmul(M: int, N: int, K: int, dtype: DType = dtypes.float32, tm: int | None = None, tn: int | None = None,
           epilogue: Callable[[UOp, UOp], UOp] | None = None, bias: bool = False, name: str = "matmul",
           b_layout: str = "rows", device: Any = None) -> ir.Kernel:
    """c (M x N) = a (M x K) @ b (K x N), row-major. Each program instance computes a tm x tn tile: tm accumulators
    of tn lanes (tn <= 16) that share one k loop, so each k step loads tn contiguous values of b once and tm values
    of a, and does tm vector multiply-adds. `epilogue(value, column)` rewrites each output (bias, relu).

    `device` is the Device, Target or Capabilities the kernel will run on; None: the default device's Target
    (DEVICEKIT_DEVICE, else the kind of highest priority), so `matmul(1024, 1024, 1024)` as a user calls it gets
    the tiles of the machine it most likely runs on (1024^3 on one Rocket Lake Xeon thread: 32-33 ms CPU time
    against the 89-97 of the 8 x 8 it got before).
    Default tiles come from its register file (`Capabilities.vector_register_bytes`), never from a vendor: tn is
    `_register_lanes` (16 float32 on AVX-512, 8 on AVX2 and without one) and the accumulators fill half the file
    (`_panel_rows`: 16 on AVX-512, 8 on AVX2; 8 x 8 without one); where that is 8 or more and the column blocks
    pair up, a tile spans PANELS_PER_TILE column blocks (8 rows x 2 x 16 lanes on AVX-512: two b vectors a k step).
    An explicit tm or tn is kept (one column block).
    `b_layout="rows"` (default): param `b` is b itself; tiles shrink to divide M and N.
    `b_layout="panels"` (default tn 16): param `bp` is `pack_b(K, N, tn=tn)`'s output, so each k step reads one
    contiguous vector; N need not divide by tn (the last panel's extra columns are computed and not stored), the
    fastest form (a weight packed once). Its default tm fills half the vector registers (4 without a device: AVX2's
    rule). On a 2-core EPYC this ran a 1024^3 float32 matmul 2.3x faster than the rows layout (bench/run.py has
    the figures). With enough panels they are walked in groups (`_panel_group`), the group outermost. Either way
    tm shrinks to divide M."""
    _check_dims("matmul", M=M, N=N, K=K)
    if b_layout not in ("rows", "panels"):
        raise ValueError(f"matmul b_layout must be 'rows' or 'panels', got {b_layout!r}")
    panels = b_layout == "panels"
    if tm is None or tn is None:  # explicit tiles need no device (nor the registry's probe of the default one)
        device = _default_target(device)
    acc_t = dtypes.float32 if dtype in (dtypes.float16, dtypes.bfloat16) else dtype
    known = bool(getattr(_capabilities(device), "vector_register_bytes", 0))
    auto = tm is None and tn is None
    if panels:
        tn = _panel_width(16 if tn is None else tn)
    else:  # rows: one register of lanes by rows filling half the file; 8 x 8 where the file is unknown
        tn = _pick_tile(N, min(_register_lanes(device, acc_t.itemsize) if tn is None else tn, 16))
    nj = -(-N // tn)
    pp = 1  # column blocks a tile spans: PANELS_PER_TILE where half the register file holds 8+ accumulators
    if tm is None:
        accs_fit = _panel_rows(device, tn, acc_t.itemsize)
        if auto and (panels or known) and accs_fit >= 4 * PANELS_PER_TILE and nj % PANELS_PER_TILE == 0:
            pp = PANELS_PER_TILE
        tm = accs_fit // pp if panels or known else 8
    tm = _pick_tile(M, tm)
    k = ir.KernelBuilder(name)
    a = k.param("a", dtype, M * K)
    b = k.param("bp", dtype, nj * K * tn) if panels else k.param("b", dtype, K * N)
    bias_p = k.param("bias", dtype, N) if bias else None
    c = k.param("c", dtype, M * N, writable=True)
    tiles_j = nj // pp
    group = _panel_group(tiles_j, K * tn * pp * dtype.itemsize) if panels else 1
    if group > 1:  # panel groups outermost (split across threads), then row tiles, then the group's panels
        jb, i, jj = k.range(tiles_j // group, "global"), k.range(M // tm, "global"), k.range(group, "global")
        jt = jb * group + jj
    else:
        i, jt = k.range(M // tm, "global"), k.range(tiles_j, "global")
    r = k.range(K, "reduce")
    f = (lambda v: v.cast(acc_t)) if acc_t != dtype else (lambda v: v)
    js = [jt * pp + q for q in range(pp)] if pp > 1 else [jt]  # the tile's panels (rows: its column block)
    brows = []
    for j in js:
        bv = [f(b[(j * K + r) * tn + y] if panels else b[r * N + j * tn + y]) for y in range(tn)]
        brows.append(ir.vectorize(*bv) if tn > 1 else bv[0])
    accs = []
    for x in range(tm):
        ax = f(a[(i * tm + x) * K + r])
        av = ir.vectorize(*([ax] * tn)) if tn > 1 else ax
        accs.append([(av * brow).sum(r) for brow in brows])
    # only with panels: the last panel's columns past N are computed, never stored; the gate col < N is the bounds
    # check of those stores (r < K, col < N: in b, bias and c), so they need no run-time one
    ragged = N % tn != 0
    for x in range(tm):
        for q, j in enumerate(js):
            for y in range(tn):
                v = accs[x][q].gep(y) if tn > 1 else accs[x][q]
                col = j * tn + y
                keep = (col < N) if ragged else None
                if bias_p is not None:
                    v = v + f(bias_p[col] if keep is None else bias_p.load(col, gate=keep, default=0, unchecked=True))
                if epilogue is not None:
                    v = epilogue(v, col)
                c.store((i * tm + x) * N + col, v.cast(dtype) if acc_t != dtype else v, gate=keep,
                        unchecked=keep is not None)
    return k.build()


def mlp_layer(M: int, N: int, K: int, dtype: DType = dtypes.float32, tm: int | None = None, tn: int | None = None,
              name: str = "mlp_layer", b_layout: str = "rows", device: Any = None) -> ir.Kernel:
    """relu(x @ w + bias): one fused kernel; params a (x, M x K), b (w, K x N; `bp`, w packed by `pack_b`, with
    b_layout="panels"), bias (N), c (out, M x N). Tiles and the default device as `matmul`'s."""
    return matmul(M, N, K, dtype, tm, tn, epilogue=lambda v, col: ir.maximum(v, 0.0), bias=True, name=name,
                  b_layout=b_layout, device=device)


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
        "reduce_sum": lambda: reduce("sum"),
        "reduce_max": lambda: reduce("max"),
        "reduce_sum_axis0": lambda: reduce("sum", axis=0),
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
