"""Kernel generator of the differential fuzzer: wider coverage than `random_kernels.random_kernel`, which stays as
it is (other suites pin its seeds). Every kernel is well-formed and its result defined: floats going to integers
are clamped first, bitcasts only start from integers (NaN payloads are not part of the contract), accesses stay in
bounds or are gated.

Shapes: elementwise, a store per lane of an unroll range, a store per step of a loop range, reductions (sum, max,
prod; over a reduce range, an unroll range, or vector lanes), vectors of 2/4/8 lanes, gathers (`gather_kernel`:
data-dependent indices, sometimes out of bounds, where every device must raise the reference's IndexError). Extras
mixed in: a signed int var used as a value and as an index offset (gated loads), k.scalar params of the kernel's
dtypes used as values (`SCALAR_FRACTION` of the kernels), gated stores, every ALU op; a
quarter of the kernels name their kernel, params and vars from `names.HOSTILE_NAMES` (`int`, `INFINITY`, `alu0`,
`entry`, ...).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from .. import ir
from ..ir import dtypes
from ..ir.dtypes import DType
from ..ir.ops import Ops
from ..ir.uop import UOp
from .names import HOSTILE_NAMES
from .random_kernels import ALL_DTYPES, FLOATS, INTS, RandomKernel, _array, _off_integers, _sin_limit, random_kernel

PROFILES = ("mixed", "base", "wide", "scalar", "ints", "floats", "memory", "shapes", "tiles", "deep", "lone", "gemm")
SHAPES = ("elementwise", "unroll_store", "loop_store", "reduce", "unroll_reduce", "vector", "vector_reduce")
# drawn apart from SHAPES (1 seed in 8), so adding one leaves every other seed's kernel as it was
EXTRA_SHAPES = ("gather",)


def _bool(dt: DType) -> DType:
    return dtypes.bool.vec(dt.count) if dt.count > 1 else dtypes.bool


class ExprGen:
    """Random typed expressions over leaves (dtype -> values); works lane-wise for vector dtypes too."""

    def __init__(self, rng: random.Random, pool: tuple[DType, ...], lanes: int = 1):
        self.rng, self.lanes = rng, lanes
        self.pool = tuple(d.vec(lanes) if lanes > 1 else d for d in pool)

    def const(self, dt: DType) -> Any:
        s = dt.scalar()
        if s.is_bool:
            return self.rng.random() < 0.5
        if s.is_float:
            return self.rng.choice([0.0, 1.0, -1.0, 0.5, round(self.rng.uniform(-4, 4), 3)])
        lo, hi = (0, 100) if s.is_unsigned else (-100, 100)
        return self.rng.choice([0, 1, s.max() if s.bits <= 16 else 7, self.rng.randint(lo, hi)])

    def leaf(self, dt: DType, leaves: dict[DType, list[UOp]]) -> UOp:
        r = self.rng
        if leaves.get(dt) and r.random() < 0.85:
            return r.choice(leaves[dt])
        src_dt = r.choice([d for d in leaves if leaves[d]])
        return self.convert(r.choice(leaves[src_dt]), dt)

    def expr(self, dt: DType, leaves: dict[DType, list[UOp]], depth: int) -> UOp:
        r, s = self.rng, dt.scalar()
        if depth <= 0 or r.random() < 0.2:
            return self.leaf(dt, leaves)
        sub = lambda d=dt: self.expr(d, leaves, depth - 1)
        if s.is_bool:
            other = r.choice(self.pool)
            if other.scalar().is_bool:
                a, b = sub(), sub()
                return r.choice([a & b, a | b, a ^ b, a.ne(b), a.eq(b)])
            a, b = sub(other), sub(other)
            return r.choice([a < b, a.ne(b), a.eq(b), a > b, a <= b])
        ops = ["add", "sub", "mul", "max", "min", "where", "neg", "cast", "const"]
        ops += ["fdiv", "exp2", "log2", "sqrt", "sin", "recip", "trunc", "mulacc"] if s.is_float else \
            ["idiv", "mod", "and", "or", "xor", "shl", "shr", "not"]
        op = r.choice(ops)
        a = sub()
        if op == "neg":
            return -a
        if op == "not":
            return ~a
        if op in ("exp2", "log2", "sqrt", "sin", "recip", "trunc"):
            # exp2 stays finite; sin's argument stays where the core's decomposition meets the contract (|x| < 2**20
            # is exact; see docs/decisions.md, Reliability, for the known limit past ~1e9)
            lim = {"exp2": 20.0, "sin": _sin_limit(a)}.get(op)
            arg = ir.minimum(ir.maximum(a, -lim), lim) if lim else a
            return getattr(ir, op)(_off_integers(arg) if op == "trunc" else arg)
        if op == "cast":
            return self.convert(sub(r.choice(self.pool)), dt)
        if op == "const":
            c = self.const(dt)
            return r.choice([lambda: a + c, lambda: a * c, lambda: ir.maximum(a, c), lambda: c - a])()
        b = sub()
        if op == "where":
            return ir.where(sub(_bool(dt)), a, b)
        if op == "mulacc":  # sometimes minus the product: shows whether the product was rounded first
            v = ir.mulacc(a, b, sub())
            return v - a * b if s.is_float and r.random() < 0.3 else v
        return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "max": lambda: ir.maximum(a, b),
                "min": lambda: ir.minimum(a, b), "fdiv": lambda: a / b, "idiv": lambda: a // b,
                "mod": lambda: a % b, "and": lambda: a & b, "or": lambda: a | b, "xor": lambda: a ^ b,
                "shl": lambda: a << b, "shr": lambda: a >> b}[op]()

    def convert(self, x: UOp, dt: DType) -> UOp:
        """A defined conversion: floats are clamped (NaN to 0) before becoming integers."""
        if x.dtype == dt:
            return x
        xs, ds = x.dtype.scalar(), dt.scalar()
        if xs.is_float and ds.is_int:
            lo, hi = (0.0, 100.0) if ds.is_unsigned else (-100.0, 100.0)
            x = ir.where(x.ne(x), 0.0, ir.minimum(ir.maximum(_off_integers(x), lo), hi))
        if xs.is_int and not ds.is_bool and xs.itemsize == ds.itemsize and self.rng.random() < 0.2:
            return x.bitcast(dt)
        return x.cast(dt)


HOSTILE_FRACTION = 0.25  # of fuzz_kernel's kernels take their kernel/param/var names from names.HOSTILE_NAMES
_ROLES = ("kernel", "n", "m", "s", "in0", "in1", "in2", "out")


def _names(seed: int) -> dict[str, str]:
    """Role -> name: the plain names, or (HOSTILE_FRACTION of seeds) distinct hostile ones. Its own random stream,
    so the kernel a seed gives is otherwise the same."""
    rr = random.Random(seed * 104729 + 3)
    if rr.random() >= HOSTILE_FRACTION:
        return {"kernel": f"fz{seed}", **{x: x for x in _ROLES[1:]}}
    return dict(zip(_ROLES, rr.sample(HOSTILE_NAMES, len(_ROLES))))


def _vec(xs: list[UOp]) -> UOp:
    return xs[0] if len(xs) == 1 else ir.vectorize(*xs)


def fuzz_kernel(seed: int, pool: tuple[DType, ...] = ALL_DTYPES, shapes: tuple[str, ...] = SHAPES + EXTRA_SHAPES,
                max_depth: int = 4, index_pool: tuple[DType, ...] | None = None) -> RandomKernel:
    """One random kernel of the fuzzer's wider generator (see the module docstring); `index_pool`: the dtypes a
    gather's index buffer may take (None: int32, int64 and uint32, whatever `pool` holds)."""
    r = random.Random(seed * 7919 + 17)
    base = tuple(s for s in shapes if s not in EXTRA_SHAPES)
    if "gather" in shapes and (not base or random.Random(seed * 104729 + 3).random() < 0.125):
        return gather_kernel(seed, random.Random(seed * 31 + 7), pool, max_depth, index_pool)
    shape = r.choice(base)
    lanes = r.choice([2, 4, 8]) if shape.startswith("vector") else 1
    if lanes > 1:  # the core's bfloat16 emulation refuses vectors (a KernelError at render time): not generated
        pool = tuple(d for d in pool if d != dtypes.bfloat16) or (dtypes.float32,)
    unroll = r.choice([2, 3, 4]) if shape.startswith("unroll") else 1
    nm = _names(seed)
    k = ir.KernelBuilder(nm["kernel"])
    n_val = r.choice([1, 2, 3, 5, 8, 17, 33, 64])
    n = k.var(nm["n"], 1, 4096)
    m_val, m = 1, None
    if shape in ("reduce", "loop_store", "vector_reduce"):
        m_val, m = r.choice([1, 2, 5, 7]), k.var(nm["m"], 1, 64)
    s_val, s = 0, None
    if r.random() < 0.4:
        s_val, s = r.randint(-4, 4), k.var(nm["s"], -8, 8)
    rows = (m if m is not None else 1) * (unroll * lanes)
    size = n * rows if not isinstance(rows, int) or rows != 1 else n
    in_dts = [r.choice(pool) for _ in range(r.randint(1, 3))]
    out_dt = r.choice([d for d in pool if not (shape.endswith("reduce") and d.is_bool)])
    params = [k.param(nm[f"in{j}"], d, size) for j, d in enumerate(in_dts)]
    per_row = shape in ("unroll_store", "loop_store", "vector")
    out = k.param(nm["out"], out_dt, size if per_row else n, writable=True)
    i = k.range(n, "global")
    inner = None
    if shape in ("reduce", "vector_reduce"):
        inner = k.range(m, "reduce")
    elif shape == "loop_store":
        inner = k.range(m, "loop")
    elif shape.startswith("unroll"):
        inner = k.range(unroll, "unroll")
    stride = rows if inner is None or shape.startswith("vector") else (m if m is not None else unroll)
    base = i * stride if not (isinstance(stride, int) and stride == 1) else i
    if inner is not None:
        base = base + (inner * lanes if lanes > 1 else inner)

    g = ExprGen(r, pool, lanes)
    leaves: dict[DType, list[UOp]] = {}
    for p in params:
        lane_vals = []
        for lane in range(lanes):
            idx = base + lane if lanes > 1 else base
            if r.random() < 0.25:  # gated neighbour read: off the edges it reads the default
                off = s if s is not None and r.random() < 0.5 else r.choice([1, -1])
                j = idx + off
                lane_vals.append(p.load(j, gate=(j >= 0) & (j < size), default=g.const(p.dtype)))
            else:
                lane_vals.append(p[idx])
        v = _vec(lane_vals)
        leaves.setdefault(v.dtype, []).append(v)
    if s is not None:
        for d in dict.fromkeys([r.choice(pool), r.choice(pool)]):  # ordered: a set's order varies per process
            sv = g.convert(s, d) if not d.is_bool else s.ne(0)
            v = _vec([sv] * lanes)
            leaves.setdefault(v.dtype, []).append(v)
    scalars = _scalars(seed, k, nm, pool, [*in_dts, out_dt])
    for sc, _ in scalars:
        v = _vec([sc] * lanes)
        leaves.setdefault(v.dtype, []).append(v)
    want = out_dt.vec(lanes) if lanes > 1 else out_dt
    val = g.expr(want, leaves, r.randint(1, max_depth))

    if shape in ("reduce", "vector_reduce", "unroll_reduce"):
        from .random_kernels import _ranges_of
        if inner not in _ranges_of(val):
            val = val + g.convert(_vec([params[0][base + lane if lanes > 1 else base] for lane in range(lanes)]), want)
        op = r.choice(["sum", "max", "prod"] if out_dt.is_int else ["sum", "max"])
        if op == "sum" and out_dt.is_float and r.random() < 0.5:  # a term that overflows (|x| >= 2), times 0: NaN
            top = 2.0 ** (np.finfo(np.float32 if out_dt == dtypes.bfloat16 else out_dt.np).maxexp - 1)
            val = (val * (r.choice([1.0, -1.0]) * top)) * 0.0
        val = getattr(val, op)(inner)
        if lanes > 1:  # combine the lanes of the reduced vector
            acc = val.gep(0)
            for lane in range(1, lanes):
                acc = ir.maximum(acc, val.gep(lane)) if op == "max" else acc + val.gep(lane)
            val = acc
        if r.random() < 0.3:  # use the reduction's result in more arithmetic
            val = g.convert(val, out_dt)
            val = ir.maximum(val, g.convert(params[-1][i * stride], out_dt))
        out_idx = i
    else:
        out_idx = base
    gate = None
    if r.random() < 0.2:
        gate = (out_idx % 3).ne(1) if s is None else (i < s + 3)
    if lanes > 1 and not shape.endswith("reduce"):
        for lane in range(lanes):
            out.store(out_idx + lane, val.gep(lane), gate=gate)
    else:
        out.store(out_idx, val, gate=gate)
    kern = k.build()

    nrng = np.random.default_rng(seed)
    nrows = (m_val if m is not None else 1) * unroll * lanes
    inputs: dict[str, Any] = {nm[f"in{j}"]: _array(nrng, d, n_val * nrows) for j, d in enumerate(in_dts)}
    inputs[nm["n"]] = n_val
    if m is not None:
        inputs[nm["m"]] = m_val
    if s is not None:
        inputs[nm["s"]] = s_val
    inputs.update((sc.arg, x) for sc, x in scalars)
    _add_specials(inputs, seed, _unordered_float_reduce(kern))
    return RandomKernel(kern, inputs, seed)


def _unordered_float_reduce(kern) -> bool:
    """Whether the kernel sums or multiplies floats in a REDUCE, whose order docs/ir.md leaves unspecified (the llvm
    pair keeps four partial sums): there ±max/2 terms that cancel make the result depend on the order."""
    return any(u.op is Ops.REDUCE and u.arg in (Ops.ADD, Ops.MUL) and u.dtype.scalar().is_float for u in kern.uops())


SCALAR_FRACTION = 0.3  # of fuzz_kernel's kernels take one or two k.scalar params, used as leaves of the expression


def _scalars(seed: int, k: ir.KernelBuilder, nm: dict[str, str], pool: tuple[DType, ...],
             used: list[DType]) -> list[tuple[UOp, Any]]:
    """(scalar node, its launch value) for the SCALAR_FRACTION of seeds that get k.scalar params: a dtype of the
    kernel's own (mostly) or of the pool, a value of that dtype's kind (floats that no narrower type holds exactly,
    both ends of an int type, either bool). Drawn from a stream of their own, so the other seeds' kernels stay."""
    sr = random.Random(seed * 15485863 + 11)
    if sr.random() >= SCALAR_FRACTION:
        return []
    hostile = nm["kernel"] != f"fz{seed}"
    free = [h for h in HOSTILE_NAMES if h not in set(nm.values())]
    out = []
    for j in range(sr.choice([1, 1, 2])):
        dt = sr.choice(used) if sr.random() < 0.7 else sr.choice(pool)
        name = sr.choice([f for f in free if f not in {u.arg for u, _ in out}]) if hostile else f"sc{j}"
        if dt.is_bool:
            x: Any = sr.random() < 0.5
        elif dt.is_float:
            x = sr.choice([0.0, 1.0, -0.5, 0.1, 1 / 3, -2.7182818284590453, 1e-3, round(sr.uniform(-8, 8), 6)])
        else:
            x = sr.choice([0, 1, dt.max(), dt.min(), sr.randint(max(dt.min(), -100), min(dt.max(), 100))])
        out.append((k.scalar(name, dt), x))
    return out


def _add_specials(inputs: dict[str, Any], seed: int, unordered: bool = False) -> None:
    """Put infinities, zeros and values whose product overflows into some float inputs (inf * 0 inside a sum must
    give NaN), from a stream of their own, so the kernel and the other values of a seed stay what they were. In a
    kernel with an unordered float sum or product (`unordered`) ±max/2 becomes ±inf: `max/2 - 4.1 - max/2 - 1.2` is
    -1.2 in order and 0.0 with partial sums (the llvm campaign's seed 3,095,419), both right by docs/ir.md; an
    infinity gives the same sum (inf, or NaN with -inf) in every order."""
    rng = np.random.default_rng(seed + 2**32)
    for arr in inputs.values():
        if isinstance(arr, np.ndarray) and arr.dtype.kind == "f" and rng.random() < 0.5:
            big = np.inf if unordered else float(np.finfo(arr.dtype).max) / 2
            hit = rng.random(arr.size) < 0.25
            arr[hit] = rng.choice(np.array([np.inf, -np.inf, 0.0, -0.0, big, -big], arr.dtype), int(hit.sum()))


def make_case(seed: int, profile: str = "mixed", pool: tuple[DType, ...] | None = None) -> RandomKernel:
    """The fuzz case of `seed`: `base` is random_kernels.random_kernel, `wide` this module's generator, `mixed`
    alternates (odd seeds wide, one seed in six a memory-order kernel of fuzz_memory, one in twelve a shaped kernel
    with triangular ranges and related vars of fuzz_shapes, one in twelve a matmul-like kernel of fuzz_tiles for the
    optimizer, one in 96 a lone reduction of fuzz_lone), `memory`, `shapes`, `tiles`, `lone` and `gemm` (the gemms
    the optimizer packs, fuzz_gemm: not in `mixed`, whose seeds keep their kernels) only those; `deep` the long and deep kernels of fuzz_deep (chains of
    thousands of steps, loads nested hundreds deep: not in `mixed`, they cost 100x a kernel; DEVICEKIT_SLOW=1
    makes them 10x longer). `pool` (`fuzz --fit`: the dtypes every pair of the device renders, `fit_pool`) keeps
    every generator to those dtypes, so a device that refuses 64-bit or 8-bit data runs its whole campaign; None
    (the default) is the full pool, and a seed gives the kernel it always gave (a pool holding every dtype too)."""
    if pool is not None:
        return _fitted_case(seed, profile, tuple(pool))
    if profile == "deep":
        from .. import settings
        from .fuzz_deep import deep_kernel
        return deep_kernel(seed, 10.0 if settings.get("DEVICEKIT_SLOW") else 1.0)
    if profile == "memory" or (profile == "mixed" and seed % 6 == 3):
        from .fuzz_memory import memory_kernel
        return memory_kernel(seed)
    if profile == "shapes" or (profile == "mixed" and seed % 12 == 5):
        from .fuzz_shapes import shaped_kernel
        return shaped_kernel(seed)
    if profile == "tiles" or (profile == "mixed" and seed % 12 == 11):
        from .fuzz_tiles import tile_kernel
        return tile_kernel(seed)
    if profile == "lone" or (profile == "mixed" and seed % 96 == 31):
        from .fuzz_lone import lone_kernel
        return lone_kernel(seed)
    if profile == "gemm":
        from .fuzz_gemm import gemm_kernel
        return gemm_kernel(seed)
    if profile == "base" or (profile == "mixed" and seed % 2 == 0):
        return random_kernel(seed)
    if profile in ("wide", "mixed"):
        return fuzz_kernel(seed)
    if profile == "scalar":
        return fuzz_kernel(seed, shapes=tuple(x for x in SHAPES if not x.startswith("vector")))
    if profile == "ints":
        return fuzz_kernel(seed, pool=INTS + (dtypes.bool,))
    if profile == "floats":
        return fuzz_kernel(seed, pool=FLOATS)
    raise ValueError(f"unknown fuzz profile {profile!r}: {', '.join(PROFILES)}")


def _fitted_case(seed: int, profile: str, pool: tuple[DType, ...]) -> RandomKernel:
    """make_case's choice of generator for `seed`, each kept to `pool` (kept in ALL_DTYPES's order: the same pool
    gives the same kernels in every process)."""
    pool = tuple(d for d in ALL_DTYPES if d in pool)
    if not pool:
        raise ValueError("fuzz: an empty dtype pool (the device renders none of the generator's dtypes)")
    if profile == "deep":
        from .. import settings
        from .fuzz_deep import deep_kernel
        return deep_kernel(seed, 10.0 if settings.get("DEVICEKIT_SLOW") else 1.0, pool)
    if profile == "memory" or (profile == "mixed" and seed % 6 == 3):
        from .fuzz_memory import memory_kernel
        return memory_kernel(seed, pool)
    if profile == "shapes" or (profile == "mixed" and seed % 12 == 5):
        from .fuzz_shapes import shaped_kernel
        return shaped_kernel(seed, pool)
    if profile == "tiles" or (profile == "mixed" and seed % 12 == 11):
        from .fuzz_tiles import tile_kernel
        return tile_kernel(seed, pool)
    if profile == "lone" or (profile == "mixed" and seed % 96 == 31):
        from .fuzz_lone import lone_kernel
        return lone_kernel(seed, pool)
    if profile == "gemm":
        from .fuzz_gemm import gemm_kernel
        return gemm_kernel(seed, pool)
    if profile == "base" or (profile == "mixed" and seed % 2 == 0):
        return random_kernel(seed, pool=pool)
    if profile in ("wide", "mixed"):
        return fuzz_kernel(seed, pool=pool, index_pool=pool)
    if profile == "scalar":
        return fuzz_kernel(seed, pool=pool, shapes=tuple(x for x in SHAPES if not x.startswith("vector")),
                           index_pool=pool)
    if profile == "ints":
        return fuzz_kernel(seed, pool=tuple(d for d in INTS + (dtypes.bool,) if d in pool) or pool, index_pool=pool)
    if profile == "floats":
        return fuzz_kernel(seed, pool=tuple(d for d in FLOATS if d in pool) or pool, index_pool=pool)
    raise ValueError(f"unknown fuzz profile {profile!r}: {', '.join(PROFILES)}")


# ---- gather: data-dependent indices (run-time bounds checks, ir/bounds.py) -------------------------------------------

_OOB = ("m", "m+1", "-1", "huge", "-huge")


_INDEX_DTYPES = (dtypes.int32, dtypes.int64, dtypes.uint32)


def gather_kernel(seed: int, r: random.Random, pool: tuple[DType, ...], max_depth: int = 4,
                  index_pool: tuple[DType, ...] | None = None) -> RandomKernel:
    """`out[i] = f(src[idx[i]])` (or summed over a reduce range of 1-4 indices per lane, or a scatter through a
    permutation) with indices read from a buffer. In bounds mostly; one case in four has a single index out of
    bounds (m, m + 1, -1, or far outside), and then every device must raise the reference's IndexError. The index
    buffer's dtype: int32, int64 or uint32 (scatter: int64), those of `index_pool` when given (a fitted campaign;
    int32 when it has none of them)."""
    pool = tuple(d for d in pool if d.count == 1) or (dtypes.float32,)
    kind = r.choice(["gather", "gather", "reduce", "scatter"])
    k = ir.KernelBuilder(f"fz{seed}")
    n, m = k.var("n", 1, 4096), k.var("m", 1, 4096)
    n_val, m_val = r.choice([1, 2, 5, 17, 64, 300]), r.choice([1, 3, 8, 33, 100])
    per = r.choice([1, 2, 4]) if kind == "reduce" else 1
    idx_dts = [d for d in _INDEX_DTYPES if index_pool is None or d in index_pool] or [dtypes.int32]
    idx_dt = r.choice(idx_dts) if kind != "scatter" else \
        (dtypes.int64 if index_pool is None or dtypes.int64 in index_pool else dtypes.int32)
    src_dt = r.choice(pool)
    out_dt = r.choice([d for d in pool if not (kind == "reduce" and d.is_bool)])
    size = m if kind != "scatter" else n
    src = k.param("src", src_dt, size if kind != "scatter" else n)
    idx = k.param("idx", idx_dt, n * per if per > 1 else n)
    out = k.param("out", out_dt, n if kind != "scatter" else m, writable=True)
    i = k.range(n, "global")
    g = ExprGen(r, pool)
    if kind == "scatter":
        j = idx[i]
        val = g.expr(out_dt, {src_dt: [src[i]]}, r.randint(0, max_depth))
        out[j] = val
    else:
        red = k.range(per, "reduce") if kind == "reduce" else None
        j = idx[i * per + red] if red is not None else idx[i]
        if r.random() < 0.3:  # arithmetic on the loaded index
            j = j + 1 - 1 if idx_dt == dtypes.uint32 else (j * 1 + 0)
        val = g.expr(out_dt, {src_dt: [src[j]]}, r.randint(0, max_depth))
        out[i] = val.sum(red) if red is not None else val
    kern = k.build()

    nrng = np.random.default_rng(seed)
    if kind == "scatter":
        m_val = max(m_val, n_val)
        ids = nrng.permutation(m_val)[:n_val].astype(idx_dt.np)  # distinct targets: no two lanes store one element
    else:
        ids = nrng.integers(0, m_val, n_val * per).astype(idx_dt.np)
    target = m_val
    if r.random() < 0.25:
        how = r.choice(_OOB if idx_dt != dtypes.uint32 else ("m", "m+1", "huge"))
        big = {dtypes.int32: 2**31 - 1, dtypes.uint32: 2**32 - 1}.get(idx_dt, 10**12)
        bad = {"m": target, "m+1": target + 1, "-1": -1, "huge": big, "-huge": -big}[how]
        ids[r.randrange(len(ids))] = bad
    inputs: dict[str, Any] = {"src": _array(nrng, src_dt, n_val if kind == "scatter" else m_val), "idx": ids,
                              "n": n_val, "m": m_val}
    return RandomKernel(kern, inputs, seed)
