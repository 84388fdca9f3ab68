"""The PYTHON device defines the semantics (docs/ir.md): each rule here is checked against numpy by hand."""


import devicekit as dk
import numpy as np
import pytest
from devicekit import ir, kernels
from devicekit.ir import dtypes


def unary_kernel(fn, in_dt, out_dt, name="u"):
    k = ir.KernelBuilder(name)
    n = k.var("n", 1)
    a = k.param("a", in_dt, n)
    out = k.param("out", out_dt, n, writable=True)
    i = k.range(n, "global")
    out[i] = fn(a[i])
    return k.build()


def binary_kernel(fn, dt, out_dt=None, name="b"):
    k = ir.KernelBuilder(name)
    n = k.var("n", 1)
    a, b = k.param("a", dt, n), k.param("b", dt, n)
    out = k.param("out", out_dt or dt, n, writable=True)
    i = k.range(n, "global")
    out[i] = fn(a[i], b[i])
    return k.build()


def run(kern, **kw):
    return dk.run(kern, device="PYTHON", **kw)["out"]


def test_integer_division_and_modulo_truncate_toward_zero():
    a = np.array([7, -7, 7, -7, 5, -2147483648], np.int32)
    b = np.array([2, 2, -2, -2, 0, -1], np.int32)
    q = run(binary_kernel(lambda x, y: x // y, dtypes.int32), a=a, b=b, n=6)
    r = run(binary_kernel(lambda x, y: x % y, dtypes.int32, name="m"), a=a, b=b, n=6)
    assert q.tolist() == [3, -3, -3, 3, 0, -2147483648]  # x//0 is 0; INT_MIN // -1 wraps
    assert r.tolist() == [1, -1, 1, -1, 0, 0]


def test_shift_amount_is_taken_modulo_the_bit_width():
    a = np.array([1, 1, -16, 3], np.int32)
    b = np.array([3, 33, 2, 32], np.int32)
    assert run(binary_kernel(lambda x, y: x << y, dtypes.int32), a=a, b=b, n=4).tolist() == [8, 2, -64, 3]
    assert run(binary_kernel(lambda x, y: x >> y, dtypes.int32, name="r"), a=a, b=b, n=4).tolist() == [0, 0, -4, 3]


def test_max_is_a_less_than_b_select_and_comparisons_with_nan_are_false():
    a = np.array([1.0, np.nan, 2.0, -0.0], np.float32)
    b = np.array([np.nan, 1.0, 3.0, 0.0], np.float32)
    m = run(binary_kernel(lambda x, y: ir.maximum(x, y), dtypes.float32), a=a, b=b, n=4)
    assert m[0] == 1.0 and np.isnan(m[1]) and m[2] == 3.0
    lt = run(binary_kernel(lambda x, y: x < y, dtypes.float32, dtypes.bool, name="lt"), a=a, b=b, n=4)
    assert lt.tolist() == [False, False, True, False]


def test_c_casts():
    f = np.array([2.9, -2.9, 0.5, 1e10], np.float32)
    out = run(unary_kernel(lambda x: x.cast(dtypes.int32), dtypes.float32, dtypes.int32), a=f, n=4)
    assert out[:3].tolist() == [2, -2, 0]  # truncation; out of range is undefined (the reference gives 0)
    w = run(unary_kernel(lambda x: x.cast(dtypes.uint8), dtypes.int32, dtypes.uint8, "w"), a=np.array([257, -1], np.int32), n=2)
    assert w.tolist() == [1, 255]
    h = run(unary_kernel(lambda x: x.cast(dtypes.float16), dtypes.float32, dtypes.float16, "h"),
            a=np.array([1.0009765625 + 2**-12, 70000.0], np.float32), n=2)
    assert h[0] == np.float16(1.0009765625 + 2**-12) and np.isinf(h[1])


def test_bfloat16_arithmetic_rounds_after_each_op():
    k = binary_kernel(lambda x, y: x + y, dtypes.bfloat16)
    a = np.array([1.0, 256.0], np.float32)
    b = np.array([2**-9, 1.0], np.float32)
    out = dk.run(k, device="PYTHON", a=a, b=b, n=2)["out"]
    vals = out if out.dtype == np.float32 else ir.dtypes.bf16_to_f32(out) if False else out
    from devicekit.ir.dtypes import bf16_to_f32
    vals = bf16_to_f32(out) if out.dtype == np.uint16 else out
    assert vals.tolist() == [1.0, 256.0]  # 1 + 2^-9 and 256 + 1 both round back (8 bits of mantissa)


def test_reductions_over_empty_ranges_give_the_identity():
    k = ir.KernelBuilder("empty")
    m, n = k.var("m", 1, 8), k.var("n", 0, 8)
    x = k.param("x", dtypes.float32, m * n)
    o = k.param("out", dtypes.float32, m, writable=True)
    i, r = k.range(m, "global"), k.range(n, "reduce")
    o[i] = x[i * n + r].sum(r)
    out = dk.run(k.build(), device="PYTHON", x=np.zeros(0, np.float32), m=1, n=0, out=np.full(1, 7, np.float32))
    assert out["out"].tolist() == [0.0]


def test_out_of_bounds_at_run_time_is_an_error_not_garbage():
    k = ir.KernelBuilder("oob")
    n, s = k.var("n", 1, 100), k.var("s", 0, 100)
    x = k.param("x", dtypes.float32, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = x[(i * s) % 7]  # not provable at build time: 6 >= n only for some values
    with pytest.raises(IndexError, match=r"access to x\[6\] is out of bounds \(size 4\)"):
        dk.run(k.build(), device="PYTHON", x=np.zeros(4, np.float32), n=4, s=3)


def test_a_million_element_kernel_is_vectorized(monkeypatch):
    """The reference evaluates each op once over every lane (numpy), never once per element: the number of op
    evaluations is the same for 16 and for 1M elements. Counted, not timed (speed is bench/'s, never asserted)."""
    from devicekit.reference.interpreter import Interpreter
    calls = []
    real = Interpreter._eval1
    monkeypatch.setattr(Interpreter, "_eval1", lambda self, u, ctx: calls.append(u) or real(self, u, ctx))
    k = kernels.elementwise("a * b + c")
    counts = []
    for n in (16, 1 << 20):
        a, b, c = (np.random.default_rng(i).standard_normal(n).astype(np.float32) for i in range(3))
        calls.clear()
        out = dk.run(k, device="PYTHON", a=a, b=b, c=c, n=n)["out"]
        np.testing.assert_allclose(out, a * b + c, rtol=1e-6)
        counts.append(len(calls))
    assert counts[0] > 0 and counts[0] == counts[1], f"op evaluations for 16 and 1M elements: {counts}"


def test_local_memory_and_barrier_are_per_workgroup():
    k = ir.KernelBuilder("rev")
    x = k.param("x", dtypes.int32, 32)
    out = k.param("out", dtypes.int32, 32, writable=True)
    g, lid = k.range(4, "global"), k.range(8, "local")
    tile = k.local("tile", dtypes.int32, 8)
    tile[lid] = x[g * 8 + lid]
    k.barrier()
    out[g * 8 + lid] = tile[7 - lid]
    got = dk.run(k.build(), device="PYTHON", x=np.arange(32, dtype=np.int32))["out"]
    assert got.tolist() == [v for blk in range(4) for v in range(blk * 8 + 7, blk * 8 - 1, -1)]


def _epoch_kernel():
    k = ir.KernelBuilder("epochs")
    x = k.param("x", dtypes.int32, 16)
    out = k.param("out", dtypes.int32, 16, writable=True)
    g, lid = k.range(2, "global"), k.range(8, "local")
    tile = k.local("tile", dtypes.int32, 8)
    tile[lid] = x[g * 8 + lid]
    k.barrier()
    v = tile[7 - lid]  # read in this epoch ...
    k.barrier()
    tile[lid] = 0  # ... even though the tile is overwritten before v is used
    k.barrier()
    out[g * 8 + lid] = v + tile[lid]
    return k.build()


def test_a_local_load_reads_in_the_barrier_epoch_it_was_built_in():
    got = dk.run(_epoch_kernel(), device="PYTHON", x=np.arange(16, dtype=np.int32))["out"]
    assert got.tolist() == [7 - i % 8 + (i // 8) * 8 for i in range(16)]


def test_the_scheduler_emits_local_loads_before_the_next_barrier():
    from devicekit.ir.linearize import lower
    from devicekit.ir.ops import ALU, Ops
    from devicekit.render.renderer import Capabilities
    caps = Capabilities(dtypes=frozenset(dtypes.all()), ops=ALU, gpu_indexing=True, has_local=True, local_max=(1024, 1024, 64))
    uops = lower(_epoch_kernel(), caps).uops
    barriers = [n for n, u in enumerate(uops) if u.op is Ops.BARRIER]
    epoch_loads = [n for n, u in enumerate(uops) if u.op is Ops.LOAD and u.arg in (("epoch", 1), ("after", 0, 2))]
    assert len(barriers) == 3 and epoch_loads and all(barriers[0] < n < barriers[1] for n in epoch_loads)


def test_max_over_an_unroll_range_skips_nan_lanes_like_a_loop():
    from devicekit.ir.linearize import lower
    from devicekit.ir.ops import ALU
    from devicekit.render.renderer import Capabilities
    k = ir.KernelBuilder("umax")
    x = k.param("x", dtypes.float32, 8)
    out = k.param("out", dtypes.float32, 2, writable=True)
    i, u = k.range(2, "global"), k.range(4, "unroll")
    out[i] = x[i * 4 + u].max(u)
    kern = k.build()
    xs = np.array([np.nan, 1.0, 2.0, np.nan, np.nan, np.nan, np.nan, np.nan], np.float32)
    assert dk.run(kern, device="PYTHON", x=xs)["out"].tolist() == [2.0, -np.inf]
    lk = lower(kern, Capabilities(dtypes=frozenset(dtypes.all()), ops=ALU, core_split=True))
    assert any(u.op.name == "CONST" and u.arg == -np.inf for u in lk.uops)  # the chain starts at max's identity
