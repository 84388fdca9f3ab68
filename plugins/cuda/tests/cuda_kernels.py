"""Kernels the CUDA tests compile and emulate: (name, kernel, inputs) built with ir.KernelBuilder, plus a seeded
generator of random elementwise kernels. Inputs include NaN/Inf where floats allow and every int width."""

from __future__ import annotations

import random

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

FLOATS = (dtypes.float32, dtypes.float16, dtypes.bfloat16, dtypes.float64)
INTS = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16, dtypes.uint32,
        dtypes.uint64)


def values(dt, n, rng, special=True, positive=False):
    if dt.is_float:
        x = rng.uniform(0.1 if positive else -4, 4, n).astype(np.float32)
        if special and n >= 8:
            x[:4] = [np.nan, np.inf, -np.inf, 0.0] if not positive else [np.nan, np.inf, 0.0, 1.0]
        return x.astype(np.float64) if dt == dtypes.float64 else x.astype(dt.np_compute)
    if dt.is_bool:
        return rng.integers(0, 2, n).astype(bool)
    info = np.iinfo(dt.np)
    lo, hi = max(info.min, -(2**40)), min(info.max, 2**40)
    x = rng.integers(lo, hi, n, endpoint=True, dtype=np.int64 if dt.name != "uint64" else np.uint64)
    x = x.astype(dt.np)
    if n >= 4:
        x[:2] = [info.min, info.max]
    return x


def elementwise(dt, fn, name, nin=2, positive=False, n=1000, special=True, unsigned_out=False):
    k = ir.KernelBuilder(name)
    nv = k.var("n", lo=1, hi=2**31 - 1)
    ins = [k.param(f"x{j}", dt, size=nv) for j in range(nin)]
    i = k.range(nv, kind="global")
    val = fn(*[b[i] for b in ins])
    o = k.param("out", val.dtype, size=nv, writable=True)
    o[i] = val
    rng = np.random.default_rng(sum(map(ord, name)))
    return name, k.build(), {**{f"x{j}": values(dt, n, rng, special, positive) for j in range(nin)}, "n": n}



_ew = elementwise


def float_kernels():
    out = []
    for dt in FLOATS:
        t = dt.name
        out.append(_ew(dt, lambda a, b: a * b + a - b / (b * b + 1.0), f"arith_{t}"))
        out.append(_ew(dt, lambda a, b: ir.maximum(a, b) + ir.where(a < b, a, b), f"maxwhere_{t}"))
        out.append(_ew(dt, lambda a: ir.exp2(a) + ir.sin(a), f"exp2sin_{t}", nin=1))
        out.append(_ew(dt, lambda a: ir.log2(a) + ir.sqrt(a), f"log2sqrt_{t}", nin=1, positive=True))
        out.append(_ew(dt, lambda a: ir.recip(a) + ir.trunc(a * 3.0), f"reciptrunc_{t}", nin=1, special=False))
        out.append(_ew(dt, lambda a, b: ir.mulacc(a, b, a), f"mulacc_{t}", special=False))
        out.append(_ew(dt, lambda a, b, dt=dt: (a < b).cast(dt) + a.eq(b).cast(dt) * 2.0 + a.ne(b).cast(dt) * 4.0,
                       f"compare_{t}"))
    return out


def int_kernels():
    out = []
    for dt in INTS:
        t = dt.name
        out.append(_ew(dt, lambda a, b: a * b + a - b, f"intarith_{t}"))
        out.append(_ew(dt, lambda a, b: (a // (b | 1)) + (a % (b | 1)), f"intdiv_{t}"))
        out.append(_ew(dt, lambda a, b: (a & b) ^ (a | b) ^ (a << (b & 3)) ^ (a >> (b & 5)), f"bits_{t}"))
        out.append(_ew(dt, lambda a, b: ir.where(a < b, ir.maximum(a, b), -a), f"intmax_{t}"))
    return out


def cast_kernels():
    out = []
    alltypes = (*FLOATS, *INTS, dtypes.bool)
    for src in alltypes:
        for dst in alltypes:
            if src == dst:
                continue
            if src.is_float and dst.is_int:  # out-of-range float->int is undefined: in range only, no NaN
                out.append(_ew(src, lambda a, d=dst: (a * 3.0).cast(d), f"cast_{src.name}_{dst.name}", nin=1,
                               special=False, n=64, positive=dst.is_unsigned))
            else:
                out.append(_ew(src, lambda a, d=dst: a.cast(d), f"cast_{src.name}_{dst.name}", nin=1, n=64))
    return out


def bitcast_kernels():
    pairs = [(dtypes.float32, dtypes.uint32), (dtypes.int32, dtypes.float32), (dtypes.float16, dtypes.int16),
             (dtypes.float64, dtypes.int64), (dtypes.uint16, dtypes.float16), (dtypes.bfloat16, dtypes.uint16)]
    return [_ew(a, lambda x, b=b: x.bitcast(b), f"bitcast_{a.name}_{b.name}", nin=1, n=64) for a, b in pairs]


def structure_kernels():
    out = []
    # 2D global grid (gidx0 + gidx1): transpose of an m x n matrix
    k = ir.KernelBuilder("transpose2d")
    m, n = k.var("m", lo=1, hi=4096), k.var("n", lo=1, hi=4096)
    a = k.param("a", dtypes.float32, size=m * n)
    o = k.param("o", dtypes.float32, size=m * n, writable=True)
    i, j = k.range(m, kind="global"), k.range(n, kind="global")
    o[j * m + i] = a[i * n + j]
    out.append(("transpose2d", k.build(), {"a": np.arange(37 * 53, dtype=np.float32), "m": 37, "n": 53}))
    # gated load with a default and a gated store
    k = ir.KernelBuilder("gated")
    n = k.var("n", lo=1, hi=2**20)
    x = k.param("x", dtypes.float32, size=n)
    o = k.param("o", dtypes.float32, size=n, writable=True)
    i = k.range(n, kind="global")
    v = x.load(i + 1, gate=(i + 1) < n, default=-1.0)
    o.store(i, v * 2.0, gate=(i % 3).ne(1))
    out.append(("gated", k.build(), {"x": np.arange(100, dtype=np.float32), "n": 100}))
    # vectors: build a float4 and read lanes back
    k = ir.KernelBuilder("vectors")
    n = k.var("n", lo=1, hi=2**20)
    x = k.param("x", dtypes.float32, size=n * 4)
    o = k.param("o", dtypes.float32, size=n, writable=True)
    i = k.range(n, kind="global")
    vec = ir.vectorize(x[i * 4], x[i * 4 + 1], x[i * 4 + 2], x[i * 4 + 3])
    o[i] = vec[0] * 1.0 + vec[1] * 10.0 + vec[2] * 100.0 + vec[3] * 1000.0
    out.append(("vectors", k.build(), {"x": np.arange(64 * 4, dtype=np.float32) % 7, "n": 64}))
    # constant sizes that are not a multiple of the block width (guard) and a tiny one
    for size in (1, 255, 257, 1000):
        k = ir.KernelBuilder(f"const{size}")
        x = k.param("x", dtypes.int32, size=size)
        o = k.param("o", dtypes.int32, size=size, writable=True)
        i = k.range(size, kind="global")
        o[i] = x[i] * 3 + i.cast(dtypes.int32)
        out.append((f"const{size}", k.build(), {"x": np.arange(size, dtype=np.int32)}))
    # an inner loop (not a reduction) inside a global range
    k = ir.KernelBuilder("inner_loop")
    n = k.var("n", lo=1, hi=4096)
    x = k.param("x", dtypes.float32, size=n * 8)
    o = k.param("o", dtypes.float32, size=n * 8, writable=True)
    i, j = k.range(n, kind="global"), k.range(8, kind="loop")
    o[i * 8 + j] = x[i * 8 + j] + j.cast(dtypes.float32)
    out.append(("inner_loop", k.build(), {"x": np.ones(40 * 8, np.float32), "n": 40}))
    # (last: tests pick the kernels above by position) independent iteration spaces (bicg): one 1-D grid over their concatenation, each thread one element of one
    k = ir.KernelBuilder("spaces")
    m, n = k.var("m", lo=1, hi=4096), k.var("n", lo=1, hi=4096)
    a = k.param("a", dtypes.float32, size=m * n)
    s, q = k.param("s", dtypes.float32, size=n, writable=True), k.param("q", dtypes.float32, size=m, writable=True)
    j, r = k.range(n, kind="global"), k.range(m, kind="reduce")
    s[j] = a[r * n + j].sum(r)
    i, r2 = k.range(m, kind="global"), k.range(n, kind="reduce")
    q[i] = a[i * n + r2].sum(r2)
    out.append(("spaces", k.build(), {"a": np.arange(37 * 300, dtype=np.float32) % 11, "m": 37, "n": 300}))
    return out


def reduce_kernels():
    out = []
    for dt, op in ((dtypes.float32, "sum"), (dtypes.float32, "max"), (dtypes.int32, "sum"), (dtypes.float16, "sum"),
                   (dtypes.float64, "prod"), (dtypes.bfloat16, "sum")):
        k = ir.KernelBuilder(f"row{op}_{dt.name}")
        m, n = k.var("m", lo=1, hi=4096), k.var("n", lo=1, hi=4096)
        a = k.param("a", dt, size=m * n)
        o = k.param("o", dt, size=m, writable=True)
        i, r = k.range(m, kind="global"), k.range(n, kind="reduce")
        o[i] = getattr(a[i * n + r], op)(r)
        rng = np.random.default_rng(1)
        vals = rng.uniform(0.5, 1.5, 13 * 29) if dt.is_float else rng.integers(-100, 100, 13 * 29)
        out.append((f"row{op}_{dt.name}", k.build(), {"a": vals.astype(dt.np_compute), "m": 13, "n": 29}))
    # matmul
    k = ir.KernelBuilder("matmul")
    m, n, kk = k.var("m", lo=1, hi=4096), k.var("n", lo=1, hi=4096), k.var("k", lo=1, hi=4096)
    a = k.param("a", dtypes.float32, size=m * kk)
    b = k.param("b", dtypes.float32, size=kk * n)
    c = k.param("c", dtypes.float32, size=m * n, writable=True)
    i, j, r = k.range(m, kind="global"), k.range(n, kind="global"), k.range(kk, kind="reduce")
    c[i * n + j] = (a[i * kk + r] * b[r * n + j]).sum(r)
    rng = np.random.default_rng(2)
    out.append(("matmul", k.build(), {"a": rng.standard_normal(17 * 23).astype(np.float32),
                                      "b": rng.standard_normal(23 * 19).astype(np.float32), "m": 17, "n": 19, "k": 23}))
    return out


def local_kernels():
    """Kernels using local ranges, shared memory and barriers (emulated with one host thread per GPU thread)."""
    out = []
    width = 64
    k = ir.KernelBuilder("block_sum")
    nb = k.var("nb", lo=1, hi=65535)
    x = k.param("x", dtypes.float32, size=nb * width)
    o = k.param("o", dtypes.float32, size=nb, writable=True)
    smem = k.local("smem", dtypes.float32, width)
    g, t = k.range(nb, kind="global"), k.range(width, kind="local")
    smem[t] = x[g * width + t]
    k.barrier()
    # every thread sums the block's values; thread 0 writes the result
    r = k.range(width, kind="reduce")
    total = smem[r].sum(r)
    o.store(g, total, gate=t.eq(0))
    out.append(("block_sum", k.build(), {"x": np.arange(5 * width, dtype=np.float32) % 11, "nb": 5}))
    # reverse within a block through shared memory
    k = ir.KernelBuilder("block_reverse")
    nb = k.var("nb", lo=1, hi=65535)
    x = k.param("x", dtypes.int32, size=nb * width)
    o = k.param("o", dtypes.int32, size=nb * width, writable=True)
    smem = k.local("tile", dtypes.int32, width)
    g, t = k.range(nb, kind="global"), k.range(width, kind="local")
    smem[t] = x[g * width + t]
    k.barrier()
    o[g * width + t] = smem[width - 1 - t]
    out.append(("block_reverse", k.build(), {"x": np.arange(3 * width, dtype=np.int32), "nb": 3}))
    return out


# ---- random elementwise kernels -----------------------------------------------------------------------------------

_FUN = {
    "f": [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / (b * b + 1.0),
          lambda a, b: ir.maximum(a, b), lambda a, b: ir.where(a < b, a, b), lambda a, b: ir.mulacc(a, b, a),
          lambda a, b: ir.sin(a), lambda a, b: ir.exp2(a * 0.25), lambda a, b: ir.sqrt(a * a + 1.0),
          lambda a, b: ir.log2(b * b + 1.0), lambda a, b: -a, lambda a, b: ir.trunc(a)],
    "i": [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a // (b | 1),
          lambda a, b: a % (b | 1), lambda a, b: a & b, lambda a, b: a | b, lambda a, b: a ^ b,
          lambda a, b: a << (b & 7), lambda a, b: a >> (b & 7), lambda a, b: ir.maximum(a, b),
          lambda a, b: ir.where(a.eq(b), a, b), lambda a, b: -a],
}


def random_kernel(seed: int):
    rnd = random.Random(seed)
    dt = rnd.choice([dtypes.float32, dtypes.float32, dtypes.float16, dtypes.float64, dtypes.int32, dtypes.int8,
                     dtypes.uint16, dtypes.int64, dtypes.uint32, dtypes.bfloat16])
    kind = "f" if dt.is_float else "i"
    k = ir.KernelBuilder(f"rand{seed}")
    n = k.var("n", lo=1, hi=2**20)
    nin = rnd.randint(1, 3)
    bufs = [k.param(f"x{j}", dt, size=n) for j in range(nin)]
    o = k.param("out", dt, size=n, writable=True)
    i = k.range(n, kind="global")
    pool = [b[i] for b in bufs]
    for _ in range(rnd.randint(2, 8)):
        pool.append(rnd.choice(_FUN[kind])(rnd.choice(pool), rnd.choice(pool)))
    o[i] = pool[-1]
    rng = np.random.default_rng(seed)
    size = rnd.choice([1, 7, 256, 300])
    inputs = {f"x{j}": values(dt, size, rng, special=False) for j in range(nin)}
    if kind == "f":
        inputs = {kk: np.clip(v, -3, 3).astype(v.dtype) for kk, v in inputs.items()}
    return f"rand{seed}", k.build(), {**inputs, "n": size}


def all_kernels():
    return [*float_kernels(), *int_kernels(), *bitcast_kernels(), *structure_kernels()]


def library_kernels():
    """Every kernel of devicekit.kernels (the core's library) with its example inputs: (name, kernel, inputs)."""
    try:
        from devicekit import kernels as lib
    except ImportError:
        return []
    return [(name, make(), lib.example_inputs(name)) for name, make in lib.all_kernels().items()]


def core_random_kernels(seeds):
    """The core's random kernels (devicekit.testing.random_kernels): (name, kernel, inputs)."""
    try:
        from devicekit.testing.random_kernels import random_kernel as core_random
    except ImportError:
        return []
    out = []
    for s in seeds:
        rk = core_random(s)
        out.append((f"core_rand{s}", rk.kernel, rk.inputs))
    return out


# ---- findings of GPU runs the emulation cannot reproduce: each returns (kernel, inputs); test_cuda_gpu runs them on
# the device, test_cuda_emulation checks their CUDA source as C++
def shapes_seed_700054():
    """The shapes fuzzer's seed 700054, shrunk: an int64 division of a gated load by a load over a lane range that
    starts at 1. On an H200 with NVRTC 13.0 (stop 27) both CUDA pairs gave 0 where the reference gives -1 at 4 of 64
    outputs, while the host emulation of the same source matched. NVRTC 13.0 and 13.1 put the gated load's address
    one element off in the unrolled loop (their PTX adds (1 - n) * 8, 13.2 and later -n * 8); they are refused now
    (compiler.MIN_NVRTC). Kept for the next GPU run, which has not happened since."""
    from devicekit import ir
    from devicekit.ir.dtypes import dtypes
    from devicekit.ir.ops import Ops
    from devicekit.ir.uop import UOp, make_alu
    k = ir.KernelBuilder('sh700054')
    n = k.var('n', 1, 48)
    k.var('kk', 0, (n - 1))
    p_x = k.param('x', dtypes.int64, shape=(n, n,))
    p_out = k.param('out', dtypes.int64, shape=(n, n,), writable=True)
    v1 = make_alu(Ops.SUB, (n, UOp.const(dtypes.int64, 1),))
    v2 = make_alu(Ops.MAX, (v1, UOp.const(dtypes.int64, 0),))
    v3 = k.range(v2, 'global')
    v4 = k.range(n, 'loop')
    v5 = make_alu(Ops.ADD, (UOp.const(dtypes.int64, 1), v3,))
    v6 = make_alu(Ops.MUL, (v5, n,))
    v7 = make_alu(Ops.ADD, (v6, v4,))
    v9 = make_alu(Ops.SUB, (v4, UOp.const(dtypes.int64, 1),))
    v10 = make_alu(Ops.MUL, (v9, n,))
    v11 = make_alu(Ops.ADD, (v10, v5,))
    v12 = make_alu(Ops.CMPLT, (v9, UOp.const(dtypes.int64, 0),))
    v13 = make_alu(Ops.CMPNE, (v12, UOp.const(dtypes.bool, True),))
    v14 = make_alu(Ops.CMPLT, (v9, n,))
    v15 = make_alu(Ops.AND, (v13, v14,))
    v16 = make_alu(Ops.CMPLT, (v5, UOp.const(dtypes.int64, 0),))
    v17 = make_alu(Ops.CMPNE, (v16, UOp.const(dtypes.bool, True),))
    v18 = make_alu(Ops.CMPLT, (v5, n,))
    v19 = make_alu(Ops.AND, (v17, v18,))
    v20 = make_alu(Ops.AND, (v15, v19,))
    v22 = p_x.load(v11, gate=v20, default=UOp.const(dtypes.int64, 0), unchecked=True)
    v23 = make_alu(Ops.MUL, (v4, n,))
    v24 = make_alu(Ops.ADD, (v23, v5,))
    v26 = p_x[v24]
    v27 = make_alu(Ops.IDIV, (v22, v26,))
    p_out.store(v7, v27)
    inputs = {
        'n': 8,
        'kk': 0,
        'x': np.array([483, -478, -495, -714, 434, 329, 902, -687, 156, 548, 788, 62, 143, -902, 110, 557, 940, 831, -213, -860, -450, 146, -551, 226, 909, -747, -123, -543, -701, 41, 819, -818, 445, 529, -825, 814, -960, 561, 797, 296, 965, -709, -21, 174, 539, -531, 648, -719, -376, 48, -166, 176, -749, 505, 274, 7, 582, -487, -783, 188, 486, -506, -629, -213], dtype=np.int64),
        'out': np.array([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], dtype=np.int64),
    }
    return k.build(), inputs


GPU_FINDINGS = [("shapes_seed_700054", shapes_seed_700054)]
